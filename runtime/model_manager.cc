#include "runtime/model_manager.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(ModelManagerOptions options) {
  absl::StatusOr<std::shared_ptr<JitEngine>> jit = JitEngine::Create();
  if (!jit.ok()) return jit.status();
  return std::unique_ptr<ModelManager>(new ModelManager(options, *jit));
}

absl::StatusOr<CompileResult> ModelManager::Compile(const std::string& name, Graph graph,
                                                    const CompileOptions& options) {
  {
    absl::MutexLock lock(&mutex_);
    if (!models_.count(name) && static_cast<int>(models_.size()) >= options_.max_models) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server already holds ", models_.size(),
                       " models, its limit (--max-models); unload one first"));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Program> program = CompileGraph(std::move(graph), options);
  if (!program.ok()) return program.status();

  CompileResult result;
  result.model_name = name;
  const auto codegen_start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<LoadedKernel>> kernels;
  for (const KernelSpec& spec : program->kernels) {
    absl::StatusOr<CacheLookup> lookup = cache_.GetOrCompile(spec, options_.codegen);
    if (!lookup.ok()) {
      return absl::Status(lookup.status().code(),
                          absl::StrCat("kernel ", spec.name, ": ", lookup.status().message()));
    }
    kernels.push_back(lookup->kernel);
    result.kernels.push_back(
        {spec.name, spec.ops, spec.nodes, lookup->key_hex, lookup->compile_ms, lookup->hit});
    (lookup->hit ? result.cache_hits : result.cache_misses)++;
  }
  result.codegen_ms = MsSince(codegen_start);
  result.record = program->record;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      CompiledModel::Create(*std::move(program), std::move(kernels));
  if (!model.ok()) return model.status();
  result.total_ms = MsSince(start);

  absl::MutexLock lock(&mutex_);
  if (!models_.count(name) && static_cast<int>(models_.size()) >= options_.max_models) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server already holds ", models_.size(), " models, its limit (--max-models)"));
  }
  models_[name] = std::shared_ptr<CompiledModel>(std::move(*model));
  return result;
}

std::shared_ptr<CompiledModel> ModelManager::Find(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<CompiledModel>>> ModelManager::List() const {
  absl::MutexLock lock(&mutex_);
  return {models_.begin(), models_.end()};
}

absl::Status ModelManager::Unload(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  if (models_.erase(name) == 0) {
    return absl::NotFoundError(absl::StrCat("no model named '", name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::runtime
