// Per-model inference statistics in the shape of Triton's ModelStatistics
// (grpc_service.proto): what ModelStatistics over gRPC answers and what the
// HTTP /stats route and the Prometheus page read. No gRPC here, so every
// front end can share one store.
//
// What is counted, as Triton counts it:
//  - success / fail: requests, with their whole time in the server (arrival
//    to answer). A failure adds only to `fail`.
//  - queue, compute_input, compute_infer, compute_output: per successful
//    request. Requests batched together each add their batch's compute
//    times (Triton does the same). Queue is the wait before the run: for
//    the batcher, for the request's shape to compile.
//  - inference_count: rows (the batch dim) of the successful requests;
//    execution_count: model runs. Four requests batched into one run add 4
//    (or their rows) and 1.
//  - batch_stats: per batch size (rows run, padding excluded), executions
//    and their compute times.
//  - cache_hit / cache_miss: the kernels the model's loads took from the
//    kernel cache / compiled, with the time spent on them (loading a hit,
//    compiling a miss); each load adds (a reload of the same version goes
//    on counting). Shapes compiled later on first use are not counted.
//    Triton's response cache has no counterpart in Kiln; its compile cache
//    is what users tune.
//  - last_inference: ms since the Unix epoch of the last request's answer.
// Times are nanoseconds. Entries are per (name, version); a model's entries
// are dropped when it is unloaded.
#ifndef KILN_ENGINE_INFERENCE_STATISTICS_H_
#define KILN_ENGINE_INFERENCE_STATISTICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kiln::engine {

// Triton's StatisticDuration.
struct StatDuration {
  int64_t count = 0;
  int64_t ns = 0;
  void Add(int64_t duration_ns) {
    ++count;
    ns += duration_ns;
  }
};

// Triton's InferBatchStatistics.
struct BatchSizeStats {
  int64_t batch_size = 0;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
};

// Triton's ModelStatistics for one model version.
struct ModelStatsSnapshot {
  std::string name;
  int64_t version = 0;
  int64_t last_inference_ms = 0;  // 0 before the first request
  int64_t inference_count = 0;
  int64_t execution_count = 0;
  StatDuration success;
  StatDuration fail;
  StatDuration queue;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
  StatDuration cache_hit;
  StatDuration cache_miss;
  std::vector<BatchSizeStats> batch_stats;  // by batch size, ascending
};

// Where one successful request's time went.
struct RequestTimes {
  int64_t total_ns = 0;  // arrival to answer
  int64_t queue_ns = 0;  // waiting: for a worker, its shape's compile, its batch
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
  int64_t rows = 1;  // the request's batch dim
};

// One model run.
struct ExecutionTimes {
  int64_t batch_size = 1;  // rows run, padding excluded
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
};

// Thread-safe.
class InferenceStatistics {
 public:
  void RecordSuccess(const std::string& name, int64_t version, const RequestTimes& times);
  void RecordFailure(const std::string& name, int64_t version, int64_t total_ns);
  void RecordExecution(const std::string& name, int64_t version, const ExecutionTimes& times);
  // A compile of the model: its kernels taken from the cache and compiled.
  void RecordCompile(const std::string& name, int64_t version, StatDuration hits,
                     StatDuration misses);
  // Drops every version of `name` (it was unloaded).
  void Forget(const std::string& name);
  // Drops the versions of `name` other than `version` (it replaced them):
  // a client replacing a model again and again holds one entry, not one
  // per replacement.
  void KeepOnly(const std::string& name, int64_t version);
  // Drops one version of `name` (it was unloaded; others stay).
  void ForgetVersion(const std::string& name, int64_t version);

  // The model's version; all zeros (with name and version set) before it
  // has any.
  ModelStatsSnapshot Get(const std::string& name, int64_t version) const;
  // Every model version with an entry, by name then version.
  std::vector<ModelStatsSnapshot> Snapshot() const;

 private:
  struct Entry {
    ModelStatsSnapshot stats;
    std::map<int64_t, BatchSizeStats> by_size;
  };
  using Key = std::pair<std::string, int64_t>;

  static ModelStatsSnapshot ToSnapshot(const Entry& entry);
  Entry& At(const std::string& name, int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  mutable absl::Mutex mutex_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_INFERENCE_STATISTICS_H_
