// Models by name: compiles graphs through the kernel cache into CompiledModels
// and serves them to concurrent callers. What the server is a thin layer over.
#ifndef KILN_ENGINE_MODEL_MANAGER_H_
#define KILN_ENGINE_MODEL_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compiler/compile.h"
#include "runtime/executor.h"
#include "engine/kernel_cache.h"

namespace kiln::engine {

struct KernelCompileReport {
  std::string name;
  std::vector<std::string> ops;
  std::vector<std::string> nodes;
  std::string key_hex;
  double compile_ms = 0;  // on a hit: the original compile time
  double load_ms = 0;     // on a disk hit: reading and linking the entry
  CacheSource source = CacheSource::kCompiled;
  std::string miss_reason;
  bool cache_hit() const { return source != CacheSource::kCompiled; }
};

// What a compile reports while it runs (server-streaming CompileModel).
struct CompileEvent {
  enum class Kind { kPassDone, kPassSkipped, kKernelDone };
  Kind kind = Kind::kPassDone;
  std::string name;
  double ms = 0;
  std::string detail;  // "changed", the skip reason, or the kernel's cache source
  int done = 0;        // kernels finished so far (kKernelDone)
  int total = 0;       // kernels in the model (kKernelDone)
};
using CompileEventSink = std::function<void(const CompileEvent&)>;

struct CompileResult {
  std::string model_name;
  CompileRecord record;  // passes, IR dumps, pass and lowering time
  std::vector<KernelCompileReport> kernels;
  double codegen_ms = 0;  // kernel cache lookups and compiles
  double total_ms = 0;
  int cache_hits = 0;
  int cache_misses = 0;
  // Intermediate bytes one inference needs after memory planning, and before.
  int64_t intermediate_bytes = 0;
  int64_t intermediate_bytes_unplanned = 0;
};

struct ModelManagerOptions {
  int max_models = 64;      // the server's --max-models
  int compile_threads = 2;  // distinct kernels of one model compile in parallel (--compile-threads)
  codegen::CodegenOptions codegen;
  KernelCacheOptions cache;
};

class ModelManager {
 public:
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(ModelManagerOptions options);

  // Compiles `graph` and serves it as `name`, replacing a model of that name
  // (callers running the old one finish on it).
  // `events`, when set, hears of each pass and kernel as it finishes (from
  // compile threads: it must be thread-safe). A kernel compile outlives a
  // caller that stops listening; its result is cached.
  absl::StatusOr<CompileResult> Compile(const std::string& name, Graph graph,
                                        const CompileOptions& options,
                                        const CompileEventSink& events = nullptr,
                                        absl::Time deadline = absl::InfiniteFuture());
  // Null when no model has that name.
  std::shared_ptr<runtime::CompiledModel> Find(const std::string& name) const;
  std::vector<std::pair<std::string, std::shared_ptr<runtime::CompiledModel>>> List() const;
  // NotFound when no model has that name.
  absl::Status Unload(const std::string& name);
  CacheStats GetCacheStats() const { return cache_.Stats(); }
  KernelCache& cache() { return cache_; }

 private:
  ModelManager(ModelManagerOptions options, std::shared_ptr<runtime::JitEngine> jit)
      : options_(options), jit_(jit), cache_(jit, options.cache) {}

  ModelManagerOptions options_;
  std::shared_ptr<runtime::JitEngine> jit_;
  KernelCache cache_;
  mutable absl::Mutex mutex_;
  std::map<std::string, std::shared_ptr<runtime::CompiledModel>> models_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_MODEL_MANAGER_H_
