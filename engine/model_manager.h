// Models by name: compiles graphs (compile_driver.h) and serves the compiled
// models to concurrent callers. What the server is a thin layer over.
#ifndef KILN_ENGINE_MODEL_MANAGER_H_
#define KILN_ENGINE_MODEL_MANAGER_H_

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compiler/driver/compile.h"
#include "engine/background_worker.h"
#include "engine/batch_statistics.h"
#include "engine/compile_driver.h"
#include "engine/compile_states.h"
#include "engine/dynamic_batcher.h"
#include "engine/dynamic_batching.h"
#include "engine/inference_statistics.h"
#include "engine/kernel_cache.h"
#include "engine/memory_budget.h"
#include "engine/request_histograms.h"
#include "engine/shape_variants.h"
#include "runtime/executor.h"

namespace kiln::engine {

// A shape variant the memory budget unloaded to make room for another
// model or shape (for the server's log).
struct VariantUnloaded {
  std::string model;
  std::string shapes;  // VariantKeyToString
  int64_t bytes = 0;
  std::string for_what;  // what it made room for
};
using VariantUnloadSink = std::function<void(const VariantUnloaded&)>;

struct ModelManagerOptions {
  int max_models = 64;      // the server's --max-models
  int compile_threads = 2;  // distinct kernels of one model compile in parallel (--compile-threads)
  codegen::CodegenOptions codegen;
  KernelCacheOptions cache;
  // Shapes of one model with symbolic dims kept compiled (--max-shape-variants).
  int max_shape_variants = 8;
  // Whether a batch of a model with symbolic dims may run as slices of a
  // smaller batch's variant (--row_chunks; row_chunks.h).
  RowChunkSetting row_chunks;
  // Compiles run this much nicer than inference (--compile-nice; 0: same).
  int compile_nice = 10;
  // Bytes every loaded model and shape variant may hold at once
  // (--max-loaded-mb; memory_budget.h). The default: no bound.
  int64_t max_loaded_bytes = std::numeric_limits<int64_t>::max();
  // Told of each shape variant unloaded to make room; from the compiling
  // thread, so it must be thread-safe. May be unset.
  VariantUnloadSink on_variant_unloaded;
};

// What a model with symbolic dims is served from, beside the graph of its
// load-time shape.
struct SymbolicModel {
  ModelSignature signature;
  // The model's graph at other shapes (the importer run again).
  GraphForShapes graph_for;
  // Sizes a symbol may take; a request outside is InvalidArgument.
  SymbolRanges ranges;
  // Shapes compiled at load besides the load-time one (TensorRT's profile
  // shapes): their first requests find them ready.
  std::vector<SymbolBinding> eager;
  // Off unless max_batch_size > 0.
  DynamicBatchingConfig batching;
  // While a new batch size compiles, serve its requests from a loaded
  // larger batch, padded (only for a model whose inputs and outputs share
  // a symbolic dim 0).
  bool pad_new_batches = true;
  // Bytes `graph_for` keeps to import the model again (its ONNX or graph
  // bytes): charged to the memory budget while the model is loaded.
  int64_t source_bytes = 0;
};

// Which model a compile makes, for the name it is to be served under.
struct ModelIdentity {
  // Of what the model was made from (its bytes and options): the same
  // again is the same model, compiled again under the same version. 0 for
  // callers that do not say, all alike.
  uint64_t fingerprint = 0;
  // Serve it under a name that serves another model, as the next version.
  // Without it that is AlreadyExists: a name silently changing models
  // under its clients is what issue 20 found.
  bool replace = false;
  // The version to serve as; 0: 1, or one more than the model replaced.
  int64_t version = 0;
  // Served beside the name's other versions (a model repository's version
  // policy) rather than in place of all of them: `version` (> 0) names the
  // one model it may replace, and only with `replace`.
  bool beside = false;
};

// A model being served and what its compile did.
struct ServedModel {
  std::string name;
  // 1 for the first model served under the name; each replacement by
  // another model adds 1 (KServe's model_version, as a number); or the
  // repository's VERSION directory.
  int64_t version = 1;
  uint64_t fingerprint = 0;
  // The variant compiled at load; null for a model whose inputs decide
  // shapes, which has none (every variant compiles on first use).
  std::shared_ptr<runtime::CompiledModel> model;
  std::shared_ptr<const CompileRecord> compile_record;
  // For a model whose inputs have symbolic dims, its other shapes; null
  // otherwise. `model` is the variant compiled at load.
  std::shared_ptr<ShapeVariants> variants;
  // Executions by batch size and queue time (every model has them).
  std::shared_ptr<BatchStatistics> batch_stats;
  // Joins concurrent requests into one run when the model was loaded with
  // dynamic batching; null otherwise.
  std::shared_ptr<DynamicBatcher> batcher;
  // Whether a request of a batch size not compiled yet may be served from
  // a larger loaded one while its own compiles (SymbolicModel).
  bool pads_new_batches = false;
  // SymbolicModel::source_bytes.
  int64_t source_bytes = 0;
};

// What a served model holds loaded, as charged to the memory budget.
struct ModelMemory {
  // Over its loaded variants (the load-time one included).
  runtime::ModelFootprint footprint;
  int64_t source_bytes = 0;
  int variants = 0;  // compiled shapes loaded now
  int64_t total_bytes() const { return footprint.held_bytes() + source_bytes; }
};
ModelMemory MemoryOf(const ServedModel& served);

class ModelManager {
 public:
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(ModelManagerOptions options);

  // Compiles `graph` and serves it as `name`, replacing a model of that name
  // (callers running the old one finish on it). `events` as for CompileModel.
  // AlreadyExists when `name` serves another model and `identity` does not
  // say replace (checked before compiling, and again before storing).
  absl::StatusOr<CompileResult> Compile(const std::string& name, Graph graph,
                                        const CompileOptions& options,
                                        const CompileEventSink& events = nullptr,
                                        absl::Time deadline = absl::InfiniteFuture(),
                                        const ModelIdentity& identity = {});
  // As Compile, for a model whose inputs have symbolic dims: `graph` is its
  // variant for the shapes in it; the eager shapes compile too before the
  // model is served; other shapes compile on first use (FindForShapes).
  // With batching enabled, requests are joined along the batch axis
  // (dynamic_batcher.h). InvalidArgument for ranges, eager shapes or
  // batching the model's signature cannot take.
  // No `graph` (a model whose inputs decide shapes, so nothing can compile
  // before a request brings their values): the model is served with no
  // variant loaded; every shape and value compiles on first use.
  absl::StatusOr<CompileResult> CompileWithShapes(const std::string& name,
                                                  std::optional<Graph> graph,
                                                  SymbolicModel symbolic,
                                                  const CompileOptions& options,
                                                  const CompileEventSink& events = nullptr,
                                                  absl::Time deadline = absl::InfiniteFuture(),
                                                  const ModelIdentity& identity = {});
  // AlreadyExists when a compile of `identity` could not be served as
  // `name` (see Compile): the check a caller makes before the work.
  absl::Status CheckServable(const std::string& name, const ModelIdentity& identity) const;
  // The model served as `name` at `version` (its number, or "": the highest,
  // Triton's rule); NotFound naming both for a version not served. For a
  // name serving no model, CompileStates::WhyNotServed.
  absl::StatusOr<ServedModel> Serve(const std::string& name, const std::string& version) const;
  // Compiling and failed names (for Serve's answers); the caller of
  // Compile marks and records, as it sees failures the manager does not
  // (an import's).
  CompileStates& states() { return states_; }
  // The versions served under `name`, ascending; empty for none.
  std::vector<int64_t> Versions(const std::string& name) const;
  // The model's load-time variant (its highest version's, as for Get and
  // FindForShapes); null when no model has that name, or
  // for a model whose inputs decide shapes (none compiles at load).
  std::shared_ptr<runtime::CompiledModel> Find(const std::string& name) const;
  // The model compiled for these input shapes (one per input, in order):
  // for a model with symbolic dims its variant for them, compiled now if
  // new; otherwise the model itself (whose Run checks the shapes).
  // NotFound for an unknown name; InvalidArgument as ShapeVariants::Get.
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> FindForShapes(
      const std::string& name, const std::vector<std::vector<int64_t>>& shapes) const;
  // The model and its compile record; nullopt when no model has that name.
  std::optional<ServedModel> Get(const std::string& name) const;
  // Every model version, by name then version.
  std::vector<ServedModel> List() const;
  // Every version of `name`; NotFound when no model has that name.
  absl::Status Unload(const std::string& name);
  // One version of `name`; NotFound when it is not served.
  absl::Status UnloadVersion(const std::string& name, int64_t version);
  CacheStats GetCacheStats() const { return cache_.Stats(); }
  // What every loaded model holds against --max-loaded-mb.
  const MemoryBudget& budget() const { return budget_; }
  // Runs shape compiles no caller waits for (ShapeVariants::CompileSoon).
  ShapeVariants::Schedule BackgroundSchedule() {
    return [this](std::function<void(bool)> task) { background_.Post(std::move(task)); };
  }
  KernelCache& cache() { return cache_; }
  const codegen::CodegenOptions& codegen() const { return options_.codegen; }
  // Per-model request, execution and compile-cache counts (Triton's
  // ModelStatistics): the front ends record requests, the manager compiles.
  InferenceStatistics& inference_stats() { return inference_stats_; }
  const InferenceStatistics& inference_stats() const { return inference_stats_; }
  // Latency buckets beside those sums, for the Prometheus page.
  RequestHistograms& request_histograms() { return request_histograms_; }
  const RequestHistograms& request_histograms() const { return request_histograms_; }

 private:
  ModelManager(ModelManagerOptions options, std::shared_ptr<runtime::JitEngine> jit)
      : options_(options),
        jit_(jit),
        cache_(jit, options.cache),
        budget_(options.max_loaded_bytes, [this](absl::string_view for_what) {
          return UnloadColdestVariant(for_what);
        }) {}

  // The memory budget's Unload: the least recently used shape variant of
  // any model that nothing else holds. Never a model itself: a user loaded
  // it, and only they may unload it.
  bool UnloadColdestVariant(absl::string_view for_what);

  // Compile and CompileWithShapes: the model compiled and stored as `name`.
  absl::StatusOr<CompileResult> CompileAndStore(const std::string& name,
                                                std::optional<Graph> graph,
                                                const CompileOptions& options,
                                                const CompileEventSink& events,
                                                absl::Time deadline,
                                                std::shared_ptr<ShapeVariants> variants,
                                                const SymbolicModel& symbolic,
                                                const ModelIdentity& identity);
  // A model whose batch is fixed (every input's dim 0, at least 2) as
  // slices of a smaller batch, when the rule of row_chunks.h says so: the
  // graph at the slices' rows is GraphAtRows's, since no importer can give
  // it. Null when the batch runs whole; the compile's report is the
  // slices' (and the tail's kernels after theirs).
  std::optional<CompiledModelAndReport> FixedBatchAsSlices(const std::string& name,
                                                           const Graph& graph,
                                                           const CompileOptions& options,
                                                           const CompileEventSink& events,
                                                           absl::Time deadline);
  // CheckServable's test, and the version a model of `identity` would be.
  absl::StatusOr<int64_t> VersionFor(const std::string& name, const ModelIdentity& identity) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The highest version served as `name`; null for none.
  const ServedModel* Highest(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  int ModelCount() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether storing a model of `identity` as `name` adds one to ModelCount.
  bool AddsAModel(const std::string& name, const ModelIdentity& identity) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  CompileDriverOptions DriverOptions() const;

  ModelManagerOptions options_;
  std::shared_ptr<runtime::JitEngine> jit_;
  KernelCache cache_;
  MemoryBudget budget_;
  mutable absl::Mutex mutex_;
  // Each name's versions; each version a model of its own (versions of one
  // model share kernels only through the cache).
  std::map<std::string, std::map<int64_t, ServedModel>> models_ ABSL_GUARDED_BY(mutex_);
  CompileStates states_;
  InferenceStatistics inference_stats_;
  RequestHistograms request_histograms_;
  // Last: gone (its running compile finished) before what compiles use.
  BackgroundWorker background_;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_MODEL_MANAGER_H_
