#include "server/metrics/kiln_metrics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/inference_statistics.h"
#include "engine/remote_cache.h"
#include "engine/request_histograms.h"
#include "server/metrics/prometheus_text.h"

namespace kiln::server {
namespace {

constexpr double kNsPerSecond = 1e9;

Labels ModelLabels(const std::string& name, int64_t version) {
  return {{"model", name}, {"version", absl::StrCat(version)}};
}

// Triton's per-model counts (InferenceStatistics), one family per number.
void WriteInferenceStatistics(const std::vector<engine::ModelStatsSnapshot>& models,
                              PrometheusText& out) {
  using Stats = engine::ModelStatsSnapshot;
  struct Counter {
    const char* name;
    const char* help;
    std::function<double(const Stats&)> value;
  };
  const Counter counters[] = {
      {"kiln_inference_request_success_total", "Inference requests answered successfully.",
       [](const Stats& s) { return s.success.count; }},
      {"kiln_inference_request_failure_total", "Inference requests that failed.",
       [](const Stats& s) { return s.fail.count; }},
      {"kiln_inference_count_total",
       "Inferences performed: rows (the batch dim) of successful requests.",
       [](const Stats& s) { return s.inference_count; }},
      {"kiln_inference_exec_count_total", "Model runs; requests batched together share one.",
       [](const Stats& s) { return s.execution_count; }},
      {"kiln_inference_request_duration_seconds_total",
       "Time successful requests spent in the server, arrival to answer.",
       [](const Stats& s) { return s.success.ns / kNsPerSecond; }},
      {"kiln_inference_failure_duration_seconds_total", "Time failed requests spent in the server.",
       [](const Stats& s) { return s.fail.ns / kNsPerSecond; }},
      {"kiln_inference_queue_duration_seconds_total",
       "Time successful requests waited: for a worker, their shape's compile, their batch.",
       [](const Stats& s) { return s.queue.ns / kNsPerSecond; }},
      {"kiln_inference_compute_input_duration_seconds_total",
       "Time spent decoding requests' inputs.",
       [](const Stats& s) { return s.compute_input.ns / kNsPerSecond; }},
      {"kiln_inference_compute_infer_duration_seconds_total", "Time spent running the model.",
       [](const Stats& s) { return s.compute_infer.ns / kNsPerSecond; }},
      {"kiln_inference_compute_output_duration_seconds_total", "Time spent encoding outputs.",
       [](const Stats& s) { return s.compute_output.ns / kNsPerSecond; }},
      {"kiln_model_kernel_cache_hits_total",
       "Kernels the model's compiles took from the kernel cache.",
       [](const Stats& s) { return s.cache_hit.count; }},
      {"kiln_model_kernel_cache_misses_total", "Kernels the model's compiles compiled.",
       [](const Stats& s) { return s.cache_miss.count; }},
  };
  for (const Counter& c : counters) {
    out.Family(c.name, "counter", c.help);
    for (const Stats& s : models) {
      out.Sample(c.name, ModelLabels(s.name, s.version), c.value(s));
    }
  }
}

void WriteLatency(absl::string_view name, const Labels& labels, const engine::LatencyHistogram& h,
                  PrometheusText& out) {
  static const std::vector<double> bounds(engine::kLatencyBucketsSeconds.begin(),
                                          engine::kLatencyBucketsSeconds.end());
  out.Histogram(name, labels, bounds, std::vector<int64_t>(h.counts.begin(), h.counts.end()),
                h.sum_ns / kNsPerSecond);
}

void WriteLatencyHistograms(const std::vector<engine::ModelLatency>& models, PrometheusText& out) {
  struct Family {
    const char* name;
    const char* help;
    const engine::LatencyHistogram engine::ModelLatency::*histogram;
  };
  const Family families[] = {
      {"kiln_inference_request_seconds",
       "Successful requests' time in the server, arrival to answer.",
       &engine::ModelLatency::request},
      {"kiln_inference_queue_seconds", "Successful requests' time waiting.",
       &engine::ModelLatency::queue},
      {"kiln_inference_compute_infer_seconds", "Successful requests' model run time.",
       &engine::ModelLatency::compute_infer},
  };
  for (const Family& f : families) {
    out.Family(f.name, "histogram", f.help);
    for (const engine::ModelLatency& m : models) {
      WriteLatency(f.name, ModelLabels(m.name, m.version), m.*(f.histogram), out);
    }
  }
}

// The Redis tier (--remote-cache), only when there is one.
void WriteRemoteCache(const engine::RemoteCacheStats& r, PrometheusText& out) {
  out.Family("kiln_remote_cache_available", "gauge",
             "1 while the remote kernel cache (Redis) answers; 0 from a failure until it does.");
  out.Sample("kiln_remote_cache_available", {}, r.available ? 1 : 0);
  const struct {
    const char* name;
    const char* help;
    int64_t value;
  } counters[] = {
      {"kiln_remote_cache_hits_total", "Verified kernels read from the remote cache.", r.hits},
      {"kiln_remote_cache_misses_total", "Remote cache lookups that found no kernel.", r.misses},
      {"kiln_remote_cache_errors_total", "Failed or timed-out Redis commands.", r.errors},
      {"kiln_remote_cache_corrupt_entries_total",
       "Remote entries that failed their checks (deleted and recompiled).", r.corrupt},
      {"kiln_remote_cache_writes_total", "Kernels written to the remote cache.", r.writes},
      {"kiln_remote_cache_write_drops_total",
       "Kernels not written: queue full, Redis unavailable or entry too large.", r.write_drops},
  };
  for (const auto& c : counters) {
    out.Family(c.name, "counter", c.help);
    out.Sample(c.name, {}, static_cast<double>(c.value));
  }
  out.Family("kiln_remote_cache_leases_total", "counter",
             "Compile leases: taken here (acquired), waited on another replica's (waited), the "
             "wait ending with its kernel (wait_hit) or with a local compile (wait_timeout).");
  out.Sample("kiln_remote_cache_leases_total", {{"event", "acquired"}}, r.leases_acquired);
  out.Sample("kiln_remote_cache_leases_total", {{"event", "waited"}}, r.lease_waits);
  out.Sample("kiln_remote_cache_leases_total", {{"event", "wait_hit"}}, r.lease_wait_hits);
  out.Sample("kiln_remote_cache_leases_total", {{"event", "wait_timeout"}}, r.lease_timeouts);
  out.Family("kiln_remote_cache_lookup_seconds", "histogram",
             "Time of remote cache lookups (one GETEX of an entry).");
  WriteLatency("kiln_remote_cache_lookup_seconds", {}, r.lookups, out);
}

void WriteCache(const engine::CacheStats& cache, PrometheusText& out) {
  out.Family("kiln_compiles_total", "counter", "Kernels compiled by this process.");
  out.Sample("kiln_compiles_total", {}, cache.compiles);
  out.Family("kiln_compile_seconds_total", "counter", "Time this process spent compiling kernels.");
  out.Sample("kiln_compile_seconds_total", {}, cache.compile_ms_total / 1e3);
  out.Family("kiln_compile_seconds_saved_total", "counter",
             "Original compile time of every kernel cache hit.");
  out.Sample("kiln_compile_seconds_saved_total", {}, cache.compile_ms_saved / 1e3);
  out.Family("kiln_kernel_cache_hits_total", "counter", "Kernel cache hits, per tier.");
  out.Sample("kiln_kernel_cache_hits_total", {{"tier", "memory"}}, cache.memory_hits);
  out.Sample("kiln_kernel_cache_hits_total", {{"tier", "disk"}}, cache.disk_hits);
  if (cache.remote.enabled) {
    out.Sample("kiln_kernel_cache_hits_total", {{"tier", "remote"}}, cache.remote_hits);
  }
  out.Family("kiln_kernel_cache_misses_total", "counter",
             "Kernel cache lookups found in no tier (compiled).");
  out.Sample("kiln_kernel_cache_misses_total", {}, cache.misses);
  out.Family("kiln_kernel_cache_bytes", "gauge", "Bytes of kernels held, per tier.");
  out.Sample("kiln_kernel_cache_bytes", {{"tier", "memory"}}, cache.memory_bytes);
  out.Sample("kiln_kernel_cache_bytes", {{"tier", "disk"}}, cache.disk.bytes);
  out.Family("kiln_kernel_cache_entries", "gauge", "Kernels held, per tier.");
  out.Sample("kiln_kernel_cache_entries", {{"tier", "memory"}}, cache.memory_entries);
  out.Sample("kiln_kernel_cache_entries", {{"tier", "disk"}}, cache.disk.entries);
  out.Family("kiln_kernel_cache_evictions_total", "counter",
             "Kernels dropped to stay within a tier's budget.");
  out.Sample("kiln_kernel_cache_evictions_total", {{"tier", "memory"}}, cache.memory_evictions);
  out.Sample("kiln_kernel_cache_evictions_total", {{"tier", "disk"}}, cache.disk.evictions);
  out.Family("kiln_kernel_cache_corrupt_entries_total", "counter",
             "Disk cache entries that failed their checks and were discarded.");
  out.Sample("kiln_kernel_cache_corrupt_entries_total", {}, cache.disk.corrupt);
  out.Family("kiln_kernel_cache_disk_write_failures_total", "counter",
             "Kernels that could not be written to the disk cache.");
  out.Sample("kiln_kernel_cache_disk_write_failures_total", {}, cache.disk.write_failures);
  if (cache.remote.enabled) WriteRemoteCache(cache.remote, out);
}

// The loaded models' kernels with the most time (kMetricsTopKernels), and
// their last compiles' pass times summed per pass.
void WriteKernelsAndPasses(const std::vector<engine::ServedModel>& served, PrometheusText& out) {
  struct KernelTotal {
    int64_t calls = 0;
    int64_t ns = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, KernelTotal> kernels;
  std::map<std::string, double> pass_ms;
  for (const engine::ServedModel& s : served) {
    if (s.compile_record) {
      for (const PassRecord& p : s.compile_record->passes) pass_ms[p.name] += p.self_ms;
    }
    if (!s.model) continue;
    for (const runtime::KernelTimingStats& k : s.model->TimingStats().kernels) {
      KernelTotal& t = kernels[{s.name, absl::StrCat(s.version), k.name}];
      t.calls += k.durations.count;
      t.ns += k.durations.total_ns;
    }
  }
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, KernelTotal>> top(
      kernels.begin(), kernels.end());
  std::stable_sort(top.begin(), top.end(),
                   [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  if (top.size() > static_cast<size_t>(kMetricsTopKernels)) top.resize(kMetricsTopKernels);
  auto labels = [](const std::tuple<std::string, std::string, std::string>& key) {
    return Labels{
        {"model", std::get<0>(key)}, {"version", std::get<1>(key)}, {"kernel", std::get<2>(key)}};
  };
  out.Family("kiln_kernel_calls_total", "counter",
             absl::StrCat("Calls of a loaded model's kernel (the ", kMetricsTopKernels,
                          " kernels with the most time)."));
  for (const auto& [key, t] : top) out.Sample("kiln_kernel_calls_total", labels(key), t.calls);
  out.Family("kiln_kernel_seconds_total", "counter",
             absl::StrCat("Time in a loaded model's kernel (the ", kMetricsTopKernels,
                          " kernels with the most time)."));
  for (const auto& [key, t] : top) {
    out.Sample("kiln_kernel_seconds_total", labels(key), t.ns / kNsPerSecond);
  }
  out.Family("kiln_compile_pass_seconds", "gauge",
             "Self time of each compiler pass in the loaded models' last compiles, summed.");
  for (const auto& [pass, ms] : pass_ms) {
    out.Sample("kiln_compile_pass_seconds", {{"pass", pass}}, ms / 1e3);
  }
}

}  // namespace

// The shared model store (--model-store), only when there is one.
void WriteModelStore(const engine::ModelStoreStats& s, PrometheusText& out) {
  out.Family("kiln_model_store_models_total", "counter",
             "Models this replica put in the model store (published), loaded from it (loaded), "
             "dropped because it was unloaded elsewhere (unloaded), or did not store for their "
             "size (too_large).");
  out.Sample("kiln_model_store_models_total", {{"event", "published"}}, s.published);
  out.Sample("kiln_model_store_models_total", {{"event", "loaded"}}, s.loads);
  out.Sample("kiln_model_store_models_total", {{"event", "unloaded"}}, s.unloads);
  out.Sample("kiln_model_store_models_total", {{"event", "too_large"}}, s.too_large);
  out.Family("kiln_model_store_lookups_total", "counter",
             "Reads of a name's mapping in the model store.");
  out.Sample("kiln_model_store_lookups_total", {}, s.lookups);
  out.Family("kiln_model_store_errors_total", "counter",
             "Failed or timed-out model store commands, and records that failed their hash.");
  out.Sample("kiln_model_store_errors_total", {}, s.errors);
}

std::string RenderKilnMetrics(const engine::ModelManager& models, const engine::ModelStore* store) {
  PrometheusText out;
  WriteInferenceStatistics(models.inference_stats().Snapshot(), out);
  WriteLatencyHistograms(models.request_histograms().Snapshot(), out);
  const std::vector<engine::ServedModel> served = models.List();
  out.Family("kiln_models_loaded", "gauge", "Models served.");
  out.Sample("kiln_models_loaded", {}, static_cast<double>(served.size()));
  const engine::MemoryBudget& budget = models.budget();
  out.Family("kiln_loaded_bytes", "gauge", "Bytes loaded models hold (--max-loaded-mb counts).");
  out.Sample("kiln_loaded_bytes", {}, static_cast<double>(budget.used_bytes()));
  out.Family("kiln_loaded_bytes_limit", "gauge", "--max-loaded-mb, in bytes.");
  out.Sample("kiln_loaded_bytes_limit", {}, static_cast<double>(budget.max_bytes()));
  out.Family("kiln_shape_variants_unloaded_total", "counter",
             "Shape variants unloaded to make room under --max-loaded-mb.");
  out.Sample("kiln_shape_variants_unloaded_total", {}, static_cast<double>(budget.unloads()));
  WriteCache(models.GetCacheStats(), out);
  if (store != nullptr) WriteModelStore(store->stats(), out);
  WriteKernelsAndPasses(served, out);
  return out.text();
}

}  // namespace kiln::server
