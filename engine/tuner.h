// Measured tuning: times each contraction kernel's schedule candidates and
// records the fastest per kernel structure and CPU in the kernel cache's
// tuning records (see tuner.cc for the method).
#ifndef KILN_ENGINE_TUNER_H_
#define KILN_ENGINE_TUNER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/compile.h"
#include "compiler/ir/graph.h"
#include "engine/kernel_cache.h"

namespace kiln::engine {

struct TuneOptions {
  // Seconds of lowering, compiling and timing per kernel; at least one
  // candidate besides the estimate's plan is timed whatever the budget.
  double budget_s_per_kernel = 10;
  int max_candidates = 12;  // per kernel, besides the estimate's plan
  // The fastest candidate is recorded only when it ran at least this many
  // times faster than the estimate's plan (timings on a busy machine move a
  // few percent); 0 records it whatever it measured.
  double min_gain = 1.03;
  // Each timing: the best of `repeat` calls (of `repeat` measurements of at
  // least min_repeat_ms without a flush). Short measurements, many of them: on a shared
  // machine the best single call is the one no other thread interrupted,
  // where a 10 ms measurement almost always is.
  int repeat = 20;
  double min_repeat_ms = 0;
  // Time each plan inside the whole model (its kernels' times in model runs,
  // the other kernels as compiled by default) rather than alone.
  bool in_model = true;
  // In the model: the best of this many runs (after one untimed).
  int model_runs = 10;
  // Alone: bytes read before each call to evict the caches (0: none, and calls
  // are timed by runtime::EvaluateTime, min_repeat_ms applying).
  int64_t flush_bytes = int64_t{8} << 20;
  // Rounds of timing the estimate and the best candidate alternately at
  // the end, each keeping its best.
  int confirm_rounds = 3;
  codegen::CodegenOptions codegen;
  // Asked between candidates: true stops the tuning with Cancelled (records
  // made so far are kept).
  std::function<bool()> should_stop;
};

struct KernelTuning {
  std::string name;   // the first kernel of its structure in the model
  int instances = 1;  // kernels of the model with this structure
  std::string default_schedule;
  std::string best_schedule;
  std::string best_override;  // ScheduleOverride::ToString; "" when none was recorded
  double default_us = 0;
  double best_us = 0;  // the recorded plan's time, else the estimate's
  int candidates = 0;  // timed, the estimate's plan included
  double seconds = 0;
  bool recorded = false;  // a tuning record was written
  double Gain() const { return best_us > 0 ? default_us / best_us : 1; }
};

// One event per kernel as it is tuned (`done` of `total`).
using TuneEventSink = std::function<void(const KernelTuning& kernel, int done, int total)>;

struct TuneResult {
  std::vector<KernelTuning> kernels;
  int records_written = 0;
  double seconds = 0;
};

// Tunes the contraction kernels of `graph` compiled under `options` (its own
// schedule_overrides are ignored): for each distinct kernel structure, times
// the estimate's plan and candidates by estimated cost within the budget, and
// writes a record to `cache.tuning()` when one beats the estimate by
// min_gain; the winning kernel is compiled into `cache`. InvalidArgument for
// a graph that does not compile; Cancelled when should_stop says so.
absl::StatusOr<TuneResult> TuneGraph(const Graph& graph, const CompileOptions& options,
                                     const TuneOptions& tune, KernelCache& cache,
                                     const TuneEventSink& events = nullptr);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_TUNER_H_
