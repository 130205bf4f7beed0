// Per-model execution counts by batch size, and time spent queued: what
// Triton reports as InferBatchStatistics and queue duration, so a user can
// see whether dynamic batching formed the batches it was set up for.
#ifndef KILN_ENGINE_BATCH_STATISTICS_H_
#define KILN_ENGINE_BATCH_STATISTICS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/duration_stats.h"

namespace kiln::engine {

// Executions of one batch size: their count and the time in each phase.
struct BatchSizeStatistics {
  int64_t batch_size = 0;
  int64_t count = 0;
  int64_t compute_input_ns = 0;   // gathering the requests' rows into one input
  int64_t compute_infer_ns = 0;   // the model's run (a compile on first use included)
  int64_t compute_output_ns = 0;  // splitting the outputs back per request
};

struct BatchStatisticsSnapshot {
  std::vector<BatchSizeStatistics> batches;  // by batch size, ascending
  runtime::DurationSnapshot queue;           // per request, from arrival to its batch's start
  int64_t padded_rows = 0;                   // rows run only to fill a batch to a compiled size
};

// Thread-safe.
class BatchStatistics {
 public:
  // `batch_size`: the requests' rows, padding excluded.
  void RecordExecution(int64_t batch_size, int64_t input_ns, int64_t infer_ns,
                       int64_t output_ns, int64_t padded_rows = 0);
  void RecordQueue(int64_t ns);
  BatchStatisticsSnapshot Snapshot() const;

 private:
  mutable absl::Mutex mutex_;
  std::map<int64_t, BatchSizeStatistics> by_size_ ABSL_GUARDED_BY(mutex_);
  runtime::DurationStats queue_ ABSL_GUARDED_BY(mutex_);
  int64_t padded_rows_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_BATCH_STATISTICS_H_
