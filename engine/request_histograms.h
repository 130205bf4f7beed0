// Per-model latency histograms for the Prometheus page: the distribution of
// successful requests' times (whole, queue, compute_infer) in fixed buckets.
// InferenceStatistics keeps Triton's {count, ns} sums; a percentile needs
// buckets, which those sums cannot give back.
#ifndef KILN_ENGINE_REQUEST_HISTOGRAMS_H_
#define KILN_ENGINE_REQUEST_HISTOGRAMS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/inference_statistics.h"
#include "engine/latency_histogram.h"

namespace kiln::engine {

struct ModelLatency {
  std::string name;
  int64_t version = 0;
  LatencyHistogram request;  // arrival to answer
  LatencyHistogram queue;
  LatencyHistogram compute_infer;
};

// Thread-safe.
class RequestHistograms {
 public:
  void Record(const std::string& name, int64_t version, const RequestTimes& times);
  // Drops every version of `name` (it was unloaded).
  void Forget(const std::string& name);
  // Drops the versions of `name` other than `version` (it replaced them), as
  // InferenceStatistics::KeepOnly does: bounded however often a name is
  // replaced.
  void KeepOnly(const std::string& name, int64_t version);
  // Drops one version of `name` (it was unloaded; others stay).
  void ForgetVersion(const std::string& name, int64_t version);
  // Every model version with observations, by name then version.
  std::vector<ModelLatency> Snapshot() const;

 private:
  mutable absl::Mutex mutex_;
  std::map<std::pair<std::string, int64_t>, ModelLatency> entries_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_REQUEST_HISTOGRAMS_H_
