#include "engine/model_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::engine {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(ModelManagerOptions options) {
  absl::StatusOr<std::shared_ptr<runtime::JitEngine>> jit = runtime::JitEngine::Create();
  if (!jit.ok()) return jit.status();
  return std::unique_ptr<ModelManager>(new ModelManager(options, *jit));
}

namespace {

// Forwards pass completions to a CompileEventSink.
class ProgressInstrument final : public PassInstrument {
 public:
  explicit ProgressInstrument(const CompileEventSink& sink) : sink_(sink) {}
  void RunBeforePass(const PassInfo&, int) override {
    starts_.push_back(std::chrono::steady_clock::now());
  }
  void RunAfterPass(const PassInfo& info, int, bool changed, PrintIr) override {
    const double ms = MsSince(starts_.back());
    starts_.pop_back();
    sink_({CompileEvent::Kind::kPassDone, info.name, ms, changed ? "changed" : "unchanged"});
  }
  void OnSkippedPass(const PassInfo& info, int, const std::string& reason) override {
    sink_({CompileEvent::Kind::kPassSkipped, info.name, 0, reason});
  }

 private:
  const CompileEventSink& sink_;
  std::vector<std::chrono::steady_clock::time_point> starts_;
};

}  // namespace

absl::StatusOr<CompileResult> ModelManager::Compile(const std::string& name, Graph graph,
                                                    const CompileOptions& options_in,
                                                    const CompileEventSink& events,
                                                    absl::Time deadline) {
  CompileOptions options = options_in;
  std::unique_ptr<ProgressInstrument> progress;
  if (events) {
    progress = std::make_unique<ProgressInstrument>(events);
    options.progress = progress.get();
  }
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
  // Distinct kernels compile in parallel on at most compile_threads threads
  // (LLVM's own dispatchers have no cap; this is the cap).
  const int count = static_cast<int>(program->kernels.size());
  std::vector<absl::StatusOr<CacheLookup>> lookups(count, absl::UnknownError("not run"));
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  auto worker = [&] {
    for (int k = next++; k < count; k = next++) {
      lookups[k] = cache_.GetOrCompile(program->kernels[k], options_.codegen, deadline);
      const int finished = ++done;
      if (events && lookups[k].ok()) {
        events({CompileEvent::Kind::kKernelDone, program->kernels[k].name,
                lookups[k]->hit() ? lookups[k]->load_ms : lookups[k]->compile_ms,
                CacheSourceName(lookups[k]->source), finished, count});
      }
    }
  };
  const int threads = std::max(1, std::min(options_.compile_threads, count));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  std::vector<std::shared_ptr<runtime::LoadedKernel>> kernels;
  for (int k = 0; k < count; ++k) {
    const KernelSpec& spec = program->kernels[k];
    if (!lookups[k].ok()) {
      return absl::Status(lookups[k].status().code(),
                          absl::StrCat("kernel ", spec.name, ": ", lookups[k].status().message()));
    }
    const CacheLookup& lookup = *lookups[k];
    kernels.push_back(lookup.kernel);
    KernelCompileReport report;
    report.name = spec.name;
    report.ops = spec.ops;
    report.nodes = spec.nodes;
    report.key_hex = lookup.key_hex;
    report.compile_ms = lookup.compile_ms;
    report.load_ms = lookup.load_ms;
    report.source = lookup.source;
    report.miss_reason = lookup.miss_reason;
    result.kernels.push_back(std::move(report));
    (lookup.hit() ? result.cache_hits : result.cache_misses)++;
  }
  result.codegen_ms = MsSince(codegen_start);
  result.record = program->record;
  absl::StatusOr<std::unique_ptr<runtime::CompiledModel>> model =
      runtime::CompiledModel::Create(*std::move(program), std::move(kernels));
  if (!model.ok()) return model.status();
  result.intermediate_bytes = (*model)->intermediate_bytes();
  result.intermediate_bytes_unplanned = (*model)->unplanned_intermediate_bytes();
  result.total_ms = MsSince(start);

  absl::MutexLock lock(&mutex_);
  if (!models_.count(name) && static_cast<int>(models_.size()) >= options_.max_models) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server already holds ", models_.size(), " models, its limit (--max-models)"));
  }
  models_[name] = std::shared_ptr<runtime::CompiledModel>(std::move(*model));
  return result;
}

std::shared_ptr<runtime::CompiledModel> ModelManager::Find(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<runtime::CompiledModel>>> ModelManager::List() const {
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

}  // namespace kiln::engine
