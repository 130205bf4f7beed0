// Triton's dynamic batching for one model: concurrent requests are queued,
// joined along dim 0 into one run, and the outputs split back, so many small
// requests cost about one larger run instead of one run each.
//
// A batch is the longest run of requests at the queue's front whose other
// dims and dtypes agree and whose rows fit max_batch_size. It runs at once
// when it reaches the largest preferred size (or max_batch_size), when the
// next request cannot join it, or when its first request has waited
// max_queue_delay_us; at a delay of 0 it takes whatever queued while the
// previous batch ran. Its rows are padded (zeros) up to the smallest
// preferred size that holds them, or with no preferred sizes to the next
// power of two (at most max_batch_size): mixed traffic then compiles a
// few batch shapes, not one per size. Exact sizes made 16 clients on the
// MLP run at half the speed of no batching at all, recompiling sizes the
// variant bound had evicted (Intel Xeon, 2 cores). Each caller gets its own
// rows; an error in the run goes to every caller in it.
#ifndef KILN_ENGINE_DYNAMIC_BATCHER_H_
#define KILN_ENGINE_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/batch_statistics.h"
#include "engine/dynamic_batching.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"

namespace kiln::engine {

// Where one request's time went in the batcher (its statistics).
struct BatchTiming {
  int64_t queue_ns = 0;  // arrival to its batch's start
  // Its batch's phases: gathering rows, the run, splitting outputs.
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
  int64_t batch_rows = 0;  // the batch's rows, padding excluded
  // Exactly one request of each batch that ran says so: the run counts once.
  bool first_in_batch = false;
};

class DynamicBatcher {
 public:
  // Called once per request, on the batcher's thread (or inline in Submit
  // for a request refused at once).
  using Done = std::function<void(absl::StatusOr<runtime::RunResult>)>;
  using TimedDone =
      std::function<void(absl::StatusOr<runtime::RunResult>, const BatchTiming& timing)>;
  // The model compiled for these input shapes (compiled now if new).
  using ModelForShapes = std::function<absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(
      const std::vector<std::vector<int64_t>>& shapes)>;

  DynamicBatcher(DynamicBatchingConfig config, ModelForShapes model_for,
                 std::shared_ptr<BatchStatistics> stats);
  // Runs what is still queued, then stops.
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // `inputs` in the model's input order, each with the request's rows as
  // dim 0. InvalidArgument (through `done`) when they disagree on the rows
  // or hold more than max_batch_size.
  void Submit(std::vector<runtime::Tensor> inputs, Done done);
  // As Submit, telling `done` where the request's time went.
  void SubmitTimed(std::vector<runtime::Tensor> inputs, TimedDone done);

  const DynamicBatchingConfig& config() const { return config_; }

 private:
  // The queue and the loop, shared with the batcher's thread: a callback
  // that drops the last reference to the batcher runs the destructor on
  // that thread, which must outlive it to finish the queue.
  class Core;

  const DynamicBatchingConfig config_;
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_DYNAMIC_BATCHER_H_
