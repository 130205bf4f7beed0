#include "engine/model_manager.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::engine {

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(ModelManagerOptions options) {
  absl::StatusOr<std::shared_ptr<runtime::JitEngine>> jit = runtime::JitEngine::Create();
  if (!jit.ok()) return jit.status();
  return std::unique_ptr<ModelManager>(new ModelManager(options, *jit));
}

absl::StatusOr<CompileResult> ModelManager::Compile(const std::string& name, Graph graph,
                                                    const CompileOptions& options,
                                                    const CompileEventSink& events,
                                                    absl::Time deadline) {
  {
    absl::MutexLock lock(&mutex_);
    if (!models_.count(name) && static_cast<int>(models_.size()) >= options_.max_models) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server already holds ", models_.size(),
                       " models, its limit (--max-models); unload one first"));
    }
  }
  CompileDriverOptions driver;
  driver.compile_threads = options_.compile_threads;
  driver.codegen = options_.codegen;
  absl::StatusOr<CompiledModelAndReport> compiled =
      CompileModel(name, std::move(graph), options, driver, cache_, events, deadline);
  if (!compiled.ok()) return compiled.status();

  ServedModel served;
  served.name = name;
  served.model = std::move(compiled->model);
  served.compile_record = std::make_shared<const CompileRecord>(compiled->report.record);
  absl::MutexLock lock(&mutex_);
  if (!models_.count(name) && static_cast<int>(models_.size()) >= options_.max_models) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server already holds ", models_.size(), " models, its limit (--max-models)"));
  }
  models_[name] = std::move(served);
  return std::move(compiled->report);
}

std::shared_ptr<runtime::CompiledModel> ModelManager::Find(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second.model;
}

std::optional<ServedModel> ModelManager::Get(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  return it->second;
}

std::vector<ServedModel> ModelManager::List() const {
  absl::MutexLock lock(&mutex_);
  std::vector<ServedModel> out;
  out.reserve(models_.size());
  for (const auto& [name, served] : models_) out.push_back(served);
  return out;
}

absl::Status ModelManager::Unload(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  if (models_.erase(name) == 0) {
    return absl::NotFoundError(absl::StrCat("no model named '", name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::engine
