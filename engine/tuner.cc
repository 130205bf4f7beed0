// Measured tuning (TVM's AutoTVM idea, on the schedule Kiln already has).
//
// Design note
// -----------
// The contraction schedule (compiler/lower/contraction_schedule.cc) picks its
// layout, register tile, K blocks and pixel split from a cost model written
// for one CPU and checked on a few. On another CPU -- or where the model is
// simply wrong, as it is for some tile shapes it measures "as if on one
// port" -- a nearby plan can run faster. The tuner times the plans instead of
// estimating them, and keeps the winner where later compiles find it:
//
//   CompileGraph (no overrides) --> distinct contraction kernels (by canonical)
//     for each kernel, within budget_s_per_kernel:
//       candidates = ScheduleCandidates(shape)       estimate's plan first, then
//                                                    the others by estimated cycles
//       time(estimate's kernel)
//       for each candidate, while the budget lasts (at least one):
//         lower the model with the candidate for this canonical only
//         compile it (JIT, not into the cache); time it
//       time the estimate and the best again, alternately (the machine is
//       shared), best of each
//       best beats the estimate by min_gain --> TuningRecord{sha256(canonical),
//                                              CPU, override, both times}
//                                          --> the tuned kernel into the cache
//
// The cost model guides the order, so a short budget still times the plans
// it rates best, and the estimate is always the baseline: a record is written
// only for a measured gain, never for a guess. A candidate is lowered through
// the whole compiler (a lookup answering only its kernel's canonical form),
// so it is exactly the kernel a later compile with the record builds;
// ScheduleOverride validation runs there too, and a candidate lowering
// reports as ignored is skipped.
//
// Records are keyed by the kernel's structure and the CPU (LLVM CPU name,
// features and /proc/cpuinfo's model name; tuning_records.h) and live in the
// kernel cache's directory. A compile (compile_driver.cc) asks them for each
// contraction by canonical form; the override followed goes into the kernel's
// cache key, so a tuned kernel and the untuned one never stand in for each
// other, and a record made on another CPU is never consulted.
//
// Timing: inputs are zero tensors of the kernel's argument types (a
// contraction's speed does not depend on its values), one checked call
// first, then runtime::EvaluateTime with `repeat` single calls (by
// default); the minimum is taken, the call least disturbed by other work.
// Measured on resnet18 with the machine's load average at 6-8 on 2 cores,
// 10 ms measurements (best of 5) put one 3x3 conv at 3.0 ms where its twin
// of the same shape took 1.6: nearly every 10 ms window held a preemption.
// Before each call the tuner reads flush_bytes (8 MB, twice this Xeon's L2)
// of its own, so the kernel finds its weights and inputs out of L2 as in a
// model, where the kernels before it filled L2 with theirs. Timed hot,
// resnet18's 512-channel 7x7 convs took about 1.4 ms alone and 3.5 ms or
// more inside the model (kiln-bench --top, busy machine): a plan chosen
// on hot caches may not be the one that wins in the model.
#include "engine/tuner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/ms_since.h"
#include "common/status_macros.h"
#include "compiler/lower/schedule_candidates.h"
#include "runtime/kernel_call.h"
#include "runtime/thread_pool.h"
#include "runtime/time_evaluator.h"

namespace kiln::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A compiled kernel with arguments to call it on.
struct Runnable {
  std::shared_ptr<runtime::LoadedKernel> kernel;
  std::vector<runtime::Tensor> inputs;
  runtime::Tensor output;
  abi::KernelFault fault;
  std::vector<void*> args;
};

absl::StatusOr<std::unique_ptr<Runnable>> Prepare(const KernelSpec& spec, runtime::JitEngine& jit,
                                                  const codegen::CodegenOptions& codegen) {
  auto r = std::make_unique<Runnable>();
  KILN_ASSIGN_OR_RETURN(std::string object, codegen::CompileToObject(spec.function, codegen));
  KILN_ASSIGN_OR_RETURN(r->kernel, jit.Load(object, spec.function.name));
  std::vector<const runtime::Tensor*> pointers;
  for (size_t i = 0; i + 1 < spec.arg_types.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(runtime::Tensor t, runtime::Tensor::Allocate(spec.arg_types[i]));
    r->inputs.push_back(std::move(t));
  }
  for (const runtime::Tensor& t : r->inputs) pointers.push_back(&t);
  // One checked call: bad arguments fail here, not inside the timing loop.
  KILN_ASSIGN_OR_RETURN(runtime::KernelCallResult first,
                        runtime::CallKernel(*r->kernel, spec.arg_types, pointers));
  r->output = std::move(first.output);
  for (runtime::Tensor& t : r->inputs) r->args.push_back(t.data());
  r->args.push_back(r->output.data());
  r->args.push_back(&r->fault);
  return r;
}

// Reads `buffer` a cache line at a time, evicting what the caches held.
void Flush(const std::vector<char>& buffer) {
  volatile char sink = 0;
  for (size_t i = 0; i < buffer.size(); i += 64) sink = sink + buffer[i];
}

// The kernel's best time: of `repeat` calls each after a flush when
// `flush` is not empty, else runtime::EvaluateTime's measurements.
double BestSeconds(Runnable& r, const TuneOptions& tune, const std::vector<char>& flush) {
  runtime::KernelFn fn = r.kernel->fn();
  void** args = r.args.data();
  if (flush.empty()) {
    runtime::TimeEvaluatorOptions options;
    options.repeat = std::max(1, tune.repeat);
    options.min_repeat_ms = tune.min_repeat_ms;
    options.warmup = 1;
    return runtime::EvaluateTime([fn, args] { fn(args); }, options).min_s;
  }
  fn(args);  // warm-up: page faults, lazy binding
  double best = 0;
  for (int i = 0; i < std::max(1, tune.repeat); ++i) {
    Flush(flush);
    const Clock::time_point start = Clock::now();
    fn(args);
    const double s = SecondsSince(start);
    if (i == 0 || s < best) best = s;
  }
  return best;
}

// The model lowered with `o` for the kernels of `canonical` only: that kernel.
absl::StatusOr<KernelSpec> LowerWith(const Graph& graph, const CompileOptions& options,
                                     const std::string& canonical,
                                     const lower::ScheduleOverride& o) {
  CompileOptions with = options;
  with.schedule_overrides = [&canonical,
                             &o](const std::string& c) -> std::optional<lower::ScheduleOverride> {
    if (c == canonical) return o;
    return std::nullopt;
  };
  KILN_ASSIGN_OR_RETURN(LoweredProgram lowered, CompileGraph(graph.Clone(), with));
  for (KernelSpec& k : lowered.kernels) {
    if (k.canonical == canonical) return std::move(k);
  }
  return absl::InternalError("the kernel being tuned vanished from a lowering");
}

}  // namespace

absl::StatusOr<TuneResult> TuneGraph(const Graph& graph, const CompileOptions& options_in,
                                     const TuneOptions& tune, KernelCache& cache,
                                     const TuneEventSink& events) {
  const Clock::time_point start = Clock::now();
  CompileOptions options = options_in;
  options.progress = nullptr;
  options.print_ir_after.clear();
  options.schedule_overrides = [](const std::string&) { return std::nullopt; };
  KILN_ASSIGN_OR_RETURN(LoweredProgram base, CompileGraph(graph.Clone(), options));

  // Distinct contraction kernels in program order, with their counts.
  std::vector<int> distinct;
  std::map<std::string, int> instances;
  for (size_t k = 0; k < base.kernels.size(); ++k) {
    const KernelSpec& spec = base.kernels[k];
    if (!spec.contraction) continue;
    if (instances[spec.canonical]++ == 0) distinct.push_back(static_cast<int>(k));
  }
  codegen::CodegenOptions codegen = tune.codegen;
  codegen.bounds_checks |= options.kernel_bounds_checks;
  lower::CandidateOptions candidate_options;
  candidate_options.max_candidates = tune.max_candidates;
  candidate_options.vary_pixel_parts = runtime::GetParallelThreads() > 1;
  runtime::JitEngine& jit = *cache.jit();
  const std::vector<char> flush(static_cast<size_t>(std::max<int64_t>(tune.flush_bytes, 0)), 1);

  TuneResult result;
  for (size_t d = 0; d < distinct.size(); ++d) {
    const KernelSpec& spec = base.kernels[distinct[d]];
    const Clock::time_point kernel_start = Clock::now();
    KernelTuning kt;
    kt.name = spec.name;
    kt.instances = instances[spec.canonical];
    kt.default_schedule = kt.best_schedule = spec.schedule;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Runnable> estimate, Prepare(spec, jit, codegen));
    double default_s = BestSeconds(*estimate, tune, flush);
    // The fastest candidate other than the estimate's plan.
    double best_s = 0;
    std::unique_ptr<Runnable> best;
    std::optional<KernelSpec> best_spec;
    kt.candidates = 1;
    const std::vector<lower::ScheduleOverride> candidates =
        lower::ScheduleCandidates(*spec.contraction, candidate_options);
    for (size_t i = 1; i < candidates.size(); ++i) {
      if (best && SecondsSince(kernel_start) >= tune.budget_s_per_kernel) break;
      if (tune.should_stop && tune.should_stop()) {
        return absl::CancelledError("tuning stopped: its caller left or its deadline passed");
      }
      absl::StatusOr<KernelSpec> candidate =
          LowerWith(graph, options, spec.canonical, candidates[i]);
      if (!candidate.ok()) return candidate.status();
      if (candidate->tuned.empty()) continue;  // the lowering refused it
      absl::StatusOr<std::unique_ptr<Runnable>> runnable = Prepare(*candidate, jit, codegen);
      if (!runnable.ok()) return runnable.status();
      ++kt.candidates;
      const double s = BestSeconds(**runnable, tune, flush);
      if (!best || s < best_s) {
        best_s = s;
        best = *std::move(runnable);
        best_spec = *std::move(candidate);
      }
    }
    // Again each, alternately: a quiet moment favours neither.
    for (int round = 0; best && round < tune.confirm_rounds; ++round) {
      default_s = std::min(default_s, BestSeconds(*estimate, tune, flush));
      best_s = std::min(best_s, BestSeconds(*best, tune, flush));
    }
    kt.default_us = kt.best_us = default_s * 1e6;
    if (best && default_s >= best_s * tune.min_gain) {
      kt.best_us = best_s * 1e6;
      kt.best_override = best_spec->tuned;
      kt.best_schedule = best_spec->schedule;
      TuningRecord record;
      record.structure = TuningStructureKey(spec.canonical);
      record.cpu = cache.tuning().host();
      record.schedule_override = best_spec->tuned;
      record.kernel = spec.name;
      record.default_schedule = spec.schedule;
      record.tuned_schedule = best_spec->schedule;
      record.default_us = kt.default_us;
      record.tuned_us = kt.best_us;
      record.candidates = kt.candidates;
      KILN_RETURN_IF_ERROR(cache.tuning().Put(record));
      kt.recorded = true;
      ++result.records_written;
      // The next compile of the model finds the tuned kernel compiled.
      KILN_RETURN_IF_ERROR(cache.GetOrCompile(*best_spec, codegen).status());
    }
    kt.seconds = SecondsSince(kernel_start);
    result.kernels.push_back(kt);
    if (events) events(kt, static_cast<int>(d) + 1, static_cast<int>(distinct.size()));
  }
  result.seconds = SecondsSince(start);
  return result;
}

}  // namespace kiln::engine
