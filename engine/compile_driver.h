// The compile driver: a graph through the compiler (passes, lowering, loop
// passes), each of its kernels through the kernel cache (distinct kernels in
// parallel), into a runtime::CompiledModel, with a report of what every step
// did and cost.
#ifndef KILN_ENGINE_COMPILE_DRIVER_H_
#define KILN_ENGINE_COMPILE_DRIVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "compiler/driver/compile.h"
#include "engine/kernel_cache.h"
#include "engine/memory_budget.h"
#include "runtime/executor.h"

namespace kiln::engine {

struct KernelCompileReport {
  std::string name;
  std::vector<std::string> ops;
  std::vector<std::string> nodes;
  // The special schedule lowering chose, or empty for the generic loop nest.
  std::string schedule;
  // The tuning record's schedule it follows, or empty; why a record was ignored.
  std::string tuned;
  std::string override_ignored;
  // One call's FLOPs and argument bytes (KernelSpec's roofline counts).
  double flops = 0;
  int64_t bytes = 0;
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
  // Kernels whose schedule came from a tuning record.
  int tuned_kernels = 0;
  // Intermediate bytes one inference needs after memory planning, and before.
  int64_t intermediate_bytes = 0;
  int64_t intermediate_bytes_unplanned = 0;
  // What the model holds loaded (the memory budget's charge).
  runtime::ModelFootprint footprint;
  // The version the model is served as (set by ModelManager).
  int64_t version = 1;
};

struct CompileDriverOptions {
  int compile_threads = 2;  // distinct kernels of one model compile in parallel
  codegen::CodegenOptions codegen;
  // Compiles run this much nicer than the caller (low_priority.h), so that
  // inference keeps its latency while models compile (--compile-nice).
  int nice = 10;
};

struct CompiledModelAndReport {
  // Charged to the compile's budget (if any) for as long as it lives.
  std::shared_ptr<runtime::CompiledModel> model;
  CompileResult report;
};

// Where a compile's model is charged: `budget` (none: nowhere), as `what`
// ("model 'm'") in its messages.
struct Admission {
  MemoryBudget* budget = nullptr;
  std::string what;
};

// Compiles `graph` as model `name`, taking its kernels from `cache` or
// compiling them into it; contraction schedules follow the cache's tuning
// records for this CPU unless `options` brings its own overrides.
// compiling them into it. `events`, when set, hears of each pass and kernel as
// it finishes (from compile threads: it must be thread-safe). A kernel compile
// outlives a caller that stops listening; its result is cached.
// The model is admitted to `admission`'s budget once lowered, before its
// kernels compile or its constants are copied: ResourceExhausted as
// MemoryBudget::Admit when it does not fit (and as PlanFootprint, budget or
// not, for a value no call could allocate).
absl::StatusOr<CompiledModelAndReport> CompileModel(const std::string& name, Graph graph,
                                                    const CompileOptions& options,
                                                    const CompileDriverOptions& driver,
                                                    KernelCache& cache,
                                                    const CompileEventSink& events,
                                                    absl::Time deadline,
                                                    const Admission& admission = {});

}  // namespace kiln::engine

#endif  // KILN_ENGINE_COMPILE_DRIVER_H_
