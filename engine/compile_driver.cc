#include "engine/compile_driver.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>
#include <chrono>
#include <thread>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/ms_since.h"
#include "compiler/lower/loop_ir.h"
#include "engine/low_priority.h"

namespace kiln::engine {
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

namespace {

absl::StatusOr<CompiledModelAndReport> CompileModelHere(const std::string& name, Graph graph,
                                                        const CompileOptions& options_in,
                                                        const CompileDriverOptions& driver,
                                                        KernelCache& cache,
                                                        const CompileEventSink& events,
                                                        absl::Time deadline,
                                                        const Admission& admission) {
  CompileOptions options = options_in;
  if (!options.schedule_overrides) {
    TuningRecords* records = &cache.tuning();
    options.schedule_overrides = [records](const std::string& canonical) {
      return records->Lookup(canonical);
    };
  }
  codegen::CodegenOptions codegen = driver.codegen;
  codegen.bounds_checks |= options.kernel_bounds_checks;
  std::unique_ptr<ProgressInstrument> progress;
  if (events) {
    progress = std::make_unique<ProgressInstrument>(events);
    options.progress = progress.get();
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<LoweredProgram> lowered = CompileGraph(std::move(graph), options);
  if (!lowered.ok()) return lowered.status();
  // Admitted from the program alone: a model that cannot load neither
  // compiles kernels nor copies constants, and a value no call could
  // allocate (issue 20's 128 GiB output) is refused before anything is.
  absl::StatusOr<runtime::ModelFootprint> planned = runtime::PlanFootprint(lowered->program);
  if (!planned.ok()) return planned.status();
  MemoryBudget::Charge charge;
  if (admission.budget != nullptr) {
    absl::StatusOr<MemoryBudget::Charge> admitted =
        admission.budget->Admit(*planned, admission.what);
    if (!admitted.ok()) return admitted.status();
    charge = *std::move(admitted);
  }

  CompileResult result;
  result.model_name = name;
  const auto codegen_start = std::chrono::steady_clock::now();
  // Distinct kernels compile in parallel on at most compile_threads threads
  // (LLVM's own dispatchers have no cap; this is the cap). A kernel identical
  // to an earlier one (resnet18's repeated blocks: 23 kernels, 18 distinct)
  // is compiled once and looked up after; the distinct ones go largest
  // first, so that no thread is left alone with a big one at the end.
  const std::vector<KernelSpec>& specs = lowered->kernels;
  const int count = static_cast<int>(specs.size());
  std::vector<absl::StatusOr<CacheLookup>> lookups(count, absl::UnknownError("not run"));
  std::vector<int> first(count);  // the first kernel identical to each
  std::vector<int> distinct;
  std::vector<size_t> size(count, 0);
  {
    std::map<std::tuple<std::string, std::string, std::string, std::string>, int> seen;
    for (int k = 0; k < count; ++k) {
      auto [it, fresh] =
          seen.emplace(std::make_tuple(specs[k].canonical, specs[k].skipped_loop_passes,
                                       specs[k].tuned, specs[k].knobs),
                       k);
      first[k] = it->second;
      if (!fresh) continue;
      distinct.push_back(k);
      size[k] = lower::LoopFunctionToString(specs[k].function).size();
    }
    std::stable_sort(distinct.begin(), distinct.end(),
                     [&](int a, int b) { return size[a] > size[b]; });
  }
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  auto report_done = [&](int k) {
    const int finished = ++done;
    if (events && lookups[k].ok()) {
      events({CompileEvent::Kind::kKernelDone, specs[k].name,
              lookups[k]->hit() ? lookups[k]->load_ms : lookups[k]->compile_ms,
              CacheSourceName(lookups[k]->source), finished, count});
    }
  };
  auto worker = [&] {
    for (int i = next++; i < static_cast<int>(distinct.size()); i = next++) {
      const int k = distinct[i];
      if (options.should_stop && options.should_stop()) {
        // The kernels compiled so far stay cached for the next try.
        lookups[k] = absl::CancelledError(
            "the compile stopped: its caller left or its deadline passed");
        continue;
      }
      lookups[k] = cache.GetOrCompile(specs[k], codegen, deadline);
      report_done(k);
    }
  };
  const int threads =
      std::max(1, std::min(driver.compile_threads, static_cast<int>(distinct.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (int k = 0; k < count; ++k) {
    if (first[k] == k) continue;
    // Compiled above: a memory hit now (or the same error).
    lookups[k] = lookups[first[k]].ok() ? cache.GetOrCompile(specs[k], codegen, deadline)
                                        : lookups[first[k]];
    report_done(k);
  }

  std::vector<std::shared_ptr<runtime::LoadedKernel>> kernels;
  for (int k = 0; k < count; ++k) {
    const KernelSpec& spec = specs[k];
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
    report.schedule = spec.schedule;
    report.tuned = spec.tuned;
    report.override_ignored = spec.override_ignored;
    if (!spec.tuned.empty()) ++result.tuned_kernels;
    report.flops = spec.flops;
    report.bytes = spec.bytes;
    report.key_hex = lookup.key_hex;
    report.compile_ms = lookup.compile_ms;
    report.load_ms = lookup.load_ms;
    report.source = lookup.source;
    report.miss_reason = lookup.miss_reason;
    result.kernels.push_back(std::move(report));
    (lookup.hit() ? result.cache_hits : result.cache_misses)++;
  }
  result.codegen_ms = MsSince(codegen_start);
  result.record = std::move(lowered->record);
  absl::StatusOr<std::unique_ptr<runtime::CompiledModel>> model =
      runtime::CompiledModel::Create(std::move(lowered->program), std::move(kernels));
  if (!model.ok()) return model.status();
  result.intermediate_bytes = (*model)->intermediate_bytes();
  result.intermediate_bytes_unplanned = (*model)->unplanned_intermediate_bytes();
  result.footprint = (*model)->footprint();
  if (admission.budget != nullptr) {
    // Code is known once linked; it fits as the rest did, or the model goes.
    absl::Status fits =
        admission.budget->Grow(charge, result.footprint.code_bytes, admission.what);
    if (!fits.ok()) return fits;
  }
  result.total_ms = MsSince(start);
  return CompiledModelAndReport{ChargedTo(*std::move(model), std::move(charge)),
                                std::move(result)};
}

}  // namespace

absl::StatusOr<CompiledModelAndReport> CompileModel(const std::string& name, Graph graph,
                                                    const CompileOptions& options,
                                                    const CompileDriverOptions& driver,
                                                    KernelCache& cache,
                                                    const CompileEventSink& events,
                                                    absl::Time deadline,
                                                    const Admission& admission) {
  absl::StatusOr<CompiledModelAndReport> compiled = absl::UnknownError("not run");
  RunAtLowerPriority(driver.nice, [&] {
    compiled = CompileModelHere(name, std::move(graph), options, driver, cache, events, deadline,
                                admission);
  });
  return compiled;
}

}  // namespace kiln::engine
