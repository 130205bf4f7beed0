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
//     for each kernel structure, within budget_s_per_kernel:
//       candidates = ScheduleCandidates(shape)       estimate's plan first, then
//                                                    the others by estimated cycles
//       time(estimate's plan)
//       for each candidate, while the budget lasts (at least one):
//         compile the model with the candidate for this structure only
//         time it
//       time the estimate and the best again, alternately (the machine is
//       shared), best of each
//       best beats the estimate by min_gain --> TuningRecord{sha256(canonical),
//                                              CPU, override, both times}
//                                          --> the tuned kernel into the cache
//
// The cost model guides the order, so a short budget still times the plans
// it rates best, and the estimate is always the baseline: a record is written
// only for a measured gain, never for a guess. A candidate goes through the
// whole compiler (a lookup answering only its kernel's canonical form), so it
// is exactly the kernel a later compile with the record builds;
// ScheduleOverride validation runs there too, and a candidate the lowering
// reports as ignored is skipped.
//
// Records are keyed by the kernel's structure and the CPU (LLVM CPU name,
// features and /proc/cpuinfo's model name; tuning_records.h) and live in the
// kernel cache's directory. A compile (compile_driver.cc) asks them for each
// contraction by canonical form; the override followed goes into the kernel's
// cache key, so a tuned kernel and the untuned one never stand in for each
// other, and a record made on another CPU is never consulted.
//
// Kernels are tuned in program order, greedily: each is timed in a model
// whose earlier kernels follow the plans recorded for them, since a plan can
// change what a later kernel finds in the caches. (Tuned independently,
// resnet18's 1x1 stride-2 conv measured 1.06x faster in a model of default
// plans and ran 0.8x as fast after the 3x3 stride-2 conv beside it, reading
// the same input, took its own record.)
//
// Timing, in the model (the default): the model is compiled with the plan
// (through a memory-only cache of the tuner's own, so each plan compiles one
// kernel and the candidates never reach the server's cache) and run on zero
// inputs (a contraction's speed does not depend on its values); the plan's
// time is the best over model_runs runs of its kernels' summed times, as the
// executor measures them. Timed alone, the kernel was a poor guide: on
// resnet18 (1 thread, load average 5-8 on 2 cores) the tuner recorded
// channel-lanes plans for the 64-channel 3x3 convs and a 1x1 stride-2 conv
// 4-5% faster alone, even with 8 MB read before each call to empty L2, that
// ran 12-14% slower inside the model (kiln-bench --top, nine alternating
// runs each, the minimum and the median agreeing), and the 512-channel 7x7
// convs took about 1.5 ms alone against 2.5 or more in the model.
//
// Timing alone (in_model = false) remains for quick checks: zero tensors of
// the kernel's argument types, one checked call, then `repeat` single calls
// each after reading flush_bytes of the tuner's own, the best taken. Short
// measurements, many of them, because on a shared machine the best single
// call is the one nothing interrupted: 10 ms measurements (best of 5) had
// put one 3x3 conv at 3.0 ms where its same-shape twin took 1.6.
#include "engine/tuner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/ms_since.h"
#include "common/status_macros.h"
#include "compiler/lower/schedule_candidates.h"
#include "engine/compile_driver.h"
#include "runtime/executor.h"
#include "runtime/kernel_call.h"
#include "runtime/thread_pool.h"
#include "runtime/time_evaluator.h"

namespace kiln::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return MsSince(start) / 1e3; }

// A compiled kernel with arguments to call it on.
struct Runnable {
  std::shared_ptr<runtime::LoadedKernel> kernel;
  std::vector<runtime::Tensor> inputs;
  runtime::Tensor output;
  abi::KernelFault fault;
  std::vector<void*> args;
};

absl::StatusOr<std::unique_ptr<Runnable>> PrepareAlone(const KernelSpec& spec,
                                                       runtime::JitEngine& jit,
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

// The kernel's best time of runtime::EvaluateTime's measurements; each one
// call after a flush when `flush` is not empty.
double BestSeconds(Runnable& r, const TuneOptions& tune, const std::vector<char>& flush) {
  runtime::KernelFn fn = r.kernel->fn();
  void** args = r.args.data();
  runtime::TimeEvaluatorOptions options;
  options.repeat = std::max(1, tune.repeat);
  options.warmup = 1;
  if (flush.empty()) {
    options.min_repeat_ms = tune.min_repeat_ms;
  } else {
    options.before_each = [&flush] { Flush(flush); };
  }
  return runtime::EvaluateTime([fn, args] { fn(args); }, options).min_s;
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

// One plan of the kernel being tuned, compiled and ready to time: the
// kernel alone, or the whole model with it.
struct Plan {
  std::string tuned;     // the override the lowering followed ("" for the estimate's)
  std::string schedule;  // its summary
  std::unique_ptr<Runnable> alone;
  std::shared_ptr<runtime::CompiledModel> model;
};

// Compiles and times plans, alone or inside the model (TuneOptions::in_model).
// In the model, every other kernel comes from a memory-only cache of the
// timer's own, so a plan costs one kernel compile; the candidates never
// reach the caller's cache.
class PlanTimer {
 public:
  PlanTimer(const Graph& graph, const CompileOptions& options, const TuneOptions& tune,
            KernelCache& cache, const codegen::CodegenOptions& codegen)
      : graph_(graph),
        options_(options),
        tune_(tune),
        jit_(cache.jit()),
        codegen_(codegen),
        flush_(static_cast<size_t>(std::max<int64_t>(tune.flush_bytes, 0)), 1) {
    if (!tune.in_model) return;
    KernelCacheOptions own;
    own.dir.clear();
    own.target = cache.target();
    model_cache_ = std::make_unique<KernelCache>(jit_, own);
  }

  // The plan `o` gives the kernels of `estimate.canonical` (nullopt: the
  // estimate's, `estimate` itself); `index` is one of them in the program.
  absl::StatusOr<Plan> Prepare(const KernelSpec& estimate, int index,
                               const std::optional<lower::ScheduleOverride>& o) {
    Plan plan;
    if (!tune_.in_model) {
      std::optional<KernelSpec> lowered;
      if (o) {
        KILN_ASSIGN_OR_RETURN(lowered, LowerWith(graph_, options_, estimate.canonical, *o));
      }
      const KernelSpec& spec = lowered ? *lowered : estimate;
      plan.tuned = spec.tuned;
      plan.schedule = spec.schedule;
      KILN_ASSIGN_OR_RETURN(plan.alone, PrepareAlone(spec, *jit_, codegen_));
      return plan;
    }
    CompileOptions with = options_;
    const std::string& canonical = estimate.canonical;
    // The kernel tuned follows `o` (or the estimate); kernels tuned before
    // it follow the plans chosen for them (Choose), as the design note says.
    with.schedule_overrides =
        [this, &canonical, &o](const std::string& c) -> std::optional<lower::ScheduleOverride> {
      if (c == canonical) return o;
      auto chosen = chosen_.find(c);
      if (chosen != chosen_.end()) return chosen->second;
      return std::nullopt;
    };
    CompileDriverOptions driver;
    driver.codegen = codegen_;
    driver.nice = 0;
    KILN_ASSIGN_OR_RETURN(CompiledModelAndReport compiled,
                          CompileModel("tuning", graph_.Clone(), with, driver, *model_cache_,
                                       nullptr, absl::InfiniteFuture()));
    plan.model = std::move(compiled.model);
    plan.tuned = compiled.report.kernels[index].tuned;
    plan.schedule = compiled.report.kernels[index].schedule;
    if (inputs_.empty()) {
      const Program& program = plan.model->program();
      for (int v : program.inputs) {
        KILN_ASSIGN_OR_RETURN(runtime::Tensor t, runtime::Tensor::Allocate(program.values[v].type));
        inputs_.push_back(std::move(t));
      }
    }
    return plan;
  }

  // Later plans are timed in a model whose kernels of `canonical` follow `o`.
  void Choose(const std::string& canonical, const lower::ScheduleOverride& o) {
    chosen_[canonical] = o;
  }

  // The plan's best time: of its kernel alone, or of the kernels `indices`
  // summed over one model run.
  absl::StatusOr<double> Seconds(Plan& plan, const std::vector<int>& indices) {
    if (plan.alone) return BestSeconds(*plan.alone, tune_, flush_);
    std::vector<const runtime::Tensor*> pointers;
    for (const runtime::Tensor& t : inputs_) pointers.push_back(&t);
    KILN_RETURN_IF_ERROR(plan.model->Run(pointers).status());  // warm-up
    double best = 0;
    for (int i = 0; i < std::max(1, tune_.model_runs); ++i) {
      KILN_ASSIGN_OR_RETURN(runtime::RunResult run, plan.model->Run(pointers));
      int64_t ns = 0;
      for (int k : indices) ns += run.kernel_times[k].ns;
      if (i == 0 || ns * 1e-9 < best) best = ns * 1e-9;
    }
    return best;
  }

 private:
  const Graph& graph_;
  const CompileOptions& options_;
  const TuneOptions& tune_;
  std::shared_ptr<runtime::JitEngine> jit_;
  codegen::CodegenOptions codegen_;
  std::vector<char> flush_;
  std::unique_ptr<KernelCache> model_cache_;
  std::vector<runtime::Tensor> inputs_;
  std::map<std::string, lower::ScheduleOverride> chosen_;  // by canonical form
};

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

  // Distinct contraction kernels, in program order.
  std::vector<int> distinct;
  std::set<std::string> seen;
  for (size_t k = 0; k < base.kernels.size(); ++k) {
    const KernelSpec& spec = base.kernels[k];
    if (spec.contraction && seen.insert(spec.canonical).second) {
      distinct.push_back(static_cast<int>(k));
    }
  }
  codegen::CodegenOptions codegen = tune.codegen;
  codegen.bounds_checks |= options.kernel_bounds_checks;
  lower::CandidateOptions candidate_options;
  candidate_options.max_candidates = tune.max_candidates;
  candidate_options.vary_pixel_parts = runtime::GetParallelThreads() > 1;
  PlanTimer timer(graph, options, tune, cache, codegen);

  TuneResult result;
  for (size_t d = 0; d < distinct.size(); ++d) {
    const KernelSpec& spec = base.kernels[distinct[d]];
    const Clock::time_point kernel_start = Clock::now();
    std::vector<int> indices;  // the kernels of this structure
    for (size_t k = 0; k < base.kernels.size(); ++k) {
      if (base.kernels[k].canonical == spec.canonical) indices.push_back(static_cast<int>(k));
    }
    KernelTuning kt;
    kt.name = spec.name;
    kt.instances = static_cast<int>(indices.size());
    kt.default_schedule = kt.best_schedule = spec.schedule;
    KILN_ASSIGN_OR_RETURN(Plan estimate, timer.Prepare(spec, indices[0], std::nullopt));
    KILN_ASSIGN_OR_RETURN(double default_s, timer.Seconds(estimate, indices));
    // The fastest candidate other than the estimate's plan.
    double best_s = 0;
    std::optional<Plan> best;
    std::optional<lower::ScheduleOverride> best_override;
    kt.candidates = 1;
    const std::vector<lower::ScheduleOverride> candidates = lower::ScheduleCandidates(
        *spec.contraction, candidate_options, lower::HostContractionKnobs());
    for (size_t i = 1; i < candidates.size(); ++i) {
      if (best && SecondsSince(kernel_start) >= tune.budget_s_per_kernel) break;
      if (tune.should_stop && tune.should_stop()) {
        return absl::CancelledError("tuning stopped: its caller left or its deadline passed");
      }
      KILN_ASSIGN_OR_RETURN(Plan plan, timer.Prepare(spec, indices[0], candidates[i]));
      if (plan.tuned.empty()) continue;  // the lowering refused it
      ++kt.candidates;
      KILN_ASSIGN_OR_RETURN(const double s, timer.Seconds(plan, indices));
      if (!best || s < best_s) {
        best_s = s;
        best = std::move(plan);
        best_override = candidates[i];
      }
    }
    // Again each, alternately: a quiet moment favours neither.
    for (int round = 0; best && round < tune.confirm_rounds; ++round) {
      KILN_ASSIGN_OR_RETURN(const double again_default, timer.Seconds(estimate, indices));
      KILN_ASSIGN_OR_RETURN(const double again_best, timer.Seconds(*best, indices));
      default_s = std::min(default_s, again_default);
      best_s = std::min(best_s, again_best);
    }
    kt.default_us = kt.best_us = default_s * 1e6;
    if (best && default_s >= best_s * tune.min_gain) {
      kt.best_us = best_s * 1e6;
      kt.best_override = best->tuned;
      kt.best_schedule = best->schedule;
      TuningRecord record;
      record.structure = TuningStructureKey(spec.canonical);
      record.cpu = cache.tuning().host();
      record.schedule_override = best->tuned;
      record.kernel = spec.name;
      record.default_schedule = spec.schedule;
      record.tuned_schedule = best->schedule;
      record.default_us = kt.default_us;
      record.tuned_us = kt.best_us;
      record.candidates = kt.candidates;
      KILN_RETURN_IF_ERROR(cache.tuning().Put(record));
      kt.recorded = true;
      ++result.records_written;
      // The next compile of the model finds the tuned kernel compiled.
      KILN_ASSIGN_OR_RETURN(KernelSpec tuned,
                            LowerWith(graph, options, spec.canonical, *best_override));
      KILN_RETURN_IF_ERROR(cache.GetOrCompile(tuned, codegen).status());
      timer.Choose(spec.canonical, *best_override);
    }
    kt.seconds = SecondsSince(kernel_start);
    result.kernels.push_back(kt);
    if (events) events(kt, static_cast<int>(d) + 1, static_cast<int>(distinct.size()));
  }
  result.seconds = SecondsSince(start);
  return result;
}

}  // namespace kiln::engine
