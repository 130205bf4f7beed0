#include "engine/inference_statistics.h"

#include <cstdint>
#include <iterator>

#include "absl/time/clock.h"

namespace kiln::engine {

InferenceStatistics::Entry& InferenceStatistics::At(const std::string& name, int64_t version) {
  Entry& entry = entries_[{name, version}];
  entry.stats.name = name;
  entry.stats.version = version;
  return entry;
}

void InferenceStatistics::RecordSuccess(const std::string& name, int64_t version,
                                        const RequestTimes& times) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mutex_);
  ModelStatsSnapshot& s = At(name, version).stats;
  s.success.Add(times.total_ns);
  s.queue.Add(times.queue_ns);
  s.compute_input.Add(times.compute_input_ns);
  s.compute_infer.Add(times.compute_infer_ns);
  s.compute_output.Add(times.compute_output_ns);
  s.inference_count += times.rows;
  s.last_inference_ms = now_ms;
}

void InferenceStatistics::RecordFailure(const std::string& name, int64_t version,
                                        int64_t total_ns) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mutex_);
  ModelStatsSnapshot& s = At(name, version).stats;
  s.fail.Add(total_ns);
  s.last_inference_ms = now_ms;
}

void InferenceStatistics::RecordExecution(const std::string& name, int64_t version,
                                          const ExecutionTimes& times) {
  absl::MutexLock lock(&mutex_);
  Entry& entry = At(name, version);
  ++entry.stats.execution_count;
  BatchSizeStats& b = entry.by_size[times.batch_size];
  b.batch_size = times.batch_size;
  b.compute_input.Add(times.compute_input_ns);
  b.compute_infer.Add(times.compute_infer_ns);
  b.compute_output.Add(times.compute_output_ns);
}

void InferenceStatistics::RecordCompile(const std::string& name, int64_t version, StatDuration hits,
                                        StatDuration misses) {
  absl::MutexLock lock(&mutex_);
  ModelStatsSnapshot& s = At(name, version).stats;
  s.cache_hit.count += hits.count;
  s.cache_hit.ns += hits.ns;
  s.cache_miss.count += misses.count;
  s.cache_miss.ns += misses.ns;
}

void InferenceStatistics::Forget(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  entries_.erase(entries_.lower_bound({name, INT64_MIN}), entries_.upper_bound({name, INT64_MAX}));
}

void InferenceStatistics::ForgetVersion(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mutex_);
  entries_.erase({name, version});
}

void InferenceStatistics::KeepOnly(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mutex_);
  for (auto it = entries_.lower_bound({name, INT64_MIN});
       it != entries_.end() && it->first.first == name;) {
    it = it->first.second == version ? std::next(it) : entries_.erase(it);
  }
}

ModelStatsSnapshot InferenceStatistics::ToSnapshot(const Entry& entry) {
  ModelStatsSnapshot out = entry.stats;
  for (const auto& [size, b] : entry.by_size) out.batch_stats.push_back(b);
  return out;
}

ModelStatsSnapshot InferenceStatistics::Get(const std::string& name, int64_t version) const {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find({name, version});
  if (it != entries_.end()) return ToSnapshot(it->second);
  ModelStatsSnapshot empty;
  empty.name = name;
  empty.version = version;
  return empty;
}

std::vector<ModelStatsSnapshot> InferenceStatistics::Snapshot() const {
  absl::MutexLock lock(&mutex_);
  std::vector<ModelStatsSnapshot> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(ToSnapshot(entry));
  return out;
}

}  // namespace kiln::engine
