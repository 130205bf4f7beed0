#include "engine/batch_statistics.h"

namespace kiln::engine {

void BatchStatistics::RecordExecution(int64_t batch_size, int64_t input_ns, int64_t infer_ns,
                                      int64_t output_ns, int64_t padded_rows) {
  absl::MutexLock lock(&mutex_);
  BatchSizeStatistics& s = by_size_[batch_size];
  s.batch_size = batch_size;
  ++s.count;
  s.compute_input_ns += input_ns;
  s.compute_infer_ns += infer_ns;
  s.compute_output_ns += output_ns;
  padded_rows_ += padded_rows;
}

void BatchStatistics::RecordQueue(int64_t ns) {
  absl::MutexLock lock(&mutex_);
  queue_.Add(ns);
}

BatchStatisticsSnapshot BatchStatistics::Snapshot() const {
  absl::MutexLock lock(&mutex_);
  BatchStatisticsSnapshot out;
  for (const auto& [size, s] : by_size_) out.batches.push_back(s);
  out.queue = queue_.Snapshot();
  out.padded_rows = padded_rows_;
  return out;
}

}  // namespace kiln::engine
