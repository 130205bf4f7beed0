#include "engine/request_histograms.h"

#include <algorithm>

namespace kiln::engine {

void RequestHistograms::Record(const std::string& name, int64_t version,
                               const RequestTimes& times) {
  absl::MutexLock lock(&mutex_);
  ModelLatency& m = entries_[{name, version}];
  m.name = name;
  m.version = version;
  m.request.Add(times.total_ns);
  m.queue.Add(times.queue_ns);
  m.compute_infer.Add(times.compute_infer_ns);
}

void RequestHistograms::Forget(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->first.first == name ? entries_.erase(it) : std::next(it);
  }
}

void RequestHistograms::ForgetVersion(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mutex_);
  entries_.erase({name, version});
}

void RequestHistograms::KeepOnly(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool other = it->first.first == name && it->first.second != version;
    it = other ? entries_.erase(it) : std::next(it);
  }
}

std::vector<ModelLatency> RequestHistograms::Snapshot() const {
  absl::MutexLock lock(&mutex_);
  std::vector<ModelLatency> out;
  for (const auto& [key, m] : entries_) out.push_back(m);
  return out;
}

}  // namespace kiln::engine
