#include "engine/dynamic_batcher.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ms_since.h"
#include "engine/batch_rows.h"

namespace kiln::engine {
class DynamicBatcher::Core {
 public:
  Core(DynamicBatchingConfig config, ModelForShapes model_for,
       std::shared_ptr<BatchStatistics> stats);

  void Submit(std::vector<runtime::Tensor> inputs, TimedDone done);
  void Stop();
  // Until stopped with an empty queue.
  void Loop();

 private:
  struct Request {
    std::vector<runtime::Tensor> inputs;
    TimedDone done;
    int64_t rows = 0;
    int64_t arrived_ns = 0;
  };

  // Whether `r` can share a run with `first`: same dtypes, same dims past 0.
  static bool Joins(const Request& first, const Request& r);
  // The batch at the queue's front: how many requests and rows it takes,
  // and whether it should run now rather than wait for more.
  bool FrontBatch(size_t* take, int64_t* rows) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The rows a batch of `rows` runs at: the smallest preferred size that
  // holds it, or `rows` itself.
  int64_t PaddedRows(int64_t rows) const;
  void Execute(std::vector<Request> batch);

  const DynamicBatchingConfig config_;
  const ModelForShapes model_for_;
  const std::shared_ptr<BatchStatistics> stats_;
  int64_t target_rows_ = 0;  // a batch this large runs without waiting

  absl::Mutex mutex_;
  absl::CondVar changed_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // The loop is waiting out a batch's delay.
  bool waiting_ ABSL_GUARDED_BY(mutex_) = false;
};

DynamicBatcher::DynamicBatcher(DynamicBatchingConfig config, ModelForShapes model_for,
                               std::shared_ptr<BatchStatistics> stats)
    : config_(config),
      core_(std::make_shared<Core>(std::move(config), std::move(model_for), std::move(stats))) {
  thread_ = std::thread([core = core_] { core->Loop(); });
}

DynamicBatcher::~DynamicBatcher() {
  core_->Stop();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // the loop holds the core; it ends once the queue is empty
  } else {
    thread_.join();
  }
}

void DynamicBatcher::Submit(std::vector<runtime::Tensor> inputs, Done done) {
  core_->Submit(std::move(inputs),
                [done = std::move(done)](absl::StatusOr<runtime::RunResult> result,
                                         const BatchTiming&) { done(std::move(result)); });
}

void DynamicBatcher::SubmitTimed(std::vector<runtime::Tensor> inputs, TimedDone done) {
  core_->Submit(std::move(inputs), std::move(done));
}

DynamicBatcher::Core::Core(DynamicBatchingConfig config, ModelForShapes model_for,
                           std::shared_ptr<BatchStatistics> stats)
    : config_(std::move(config)), model_for_(std::move(model_for)), stats_(std::move(stats)) {
  target_rows_ = config_.preferred_batch_sizes.empty()
                     ? config_.max_batch_size
                     : *std::max_element(config_.preferred_batch_sizes.begin(),
                                         config_.preferred_batch_sizes.end());
}

void DynamicBatcher::Core::Stop() {
  absl::MutexLock lock(&mutex_);
  stopping_ = true;
  changed_.SignalAll();
}

void DynamicBatcher::Core::Submit(std::vector<runtime::Tensor> inputs, TimedDone done) {
  Request r;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int64_t>& shape = inputs[i].type().shape;
    const int64_t rows = shape.empty() ? 0 : shape[0];
    if (i == 0) r.rows = rows;
    if (shape.empty() || rows != r.rows) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "dynamic batching joins requests along dim 0, so every input needs the same first "
          "dim; input ", i, " has shape ", ShapeToString(shape), ", input 0 ",
          ShapeToString(inputs[0].type().shape))), {});
      return;
    }
  }
  if (r.rows < 1 || r.rows > config_.max_batch_size) {
    done(absl::InvalidArgumentError(absl::StrCat("the request's batch of ", r.rows,
                                                 " rows is outside 1..max_batch_size (",
                                                 config_.max_batch_size, ")")), {});
    return;
  }
  r.inputs = std::move(inputs);
  r.done = std::move(done);
  r.arrived_ns = SteadyNowNs();
  {
    absl::MutexLock lock(&mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(r));
      // A batch waiting out its delay is woken only when this request
      // completes it: a wake-up per request cost a context switch each.
      size_t take = 0;
      int64_t rows = 0;
      if (!waiting_ || FrontBatch(&take, &rows)) changed_.Signal();
      return;
    }
  }
  r.done(absl::UnavailableError("the model is being unloaded or replaced; try again"), {});
}

bool DynamicBatcher::Core::Joins(const Request& first, const Request& r) {
  if (r.inputs.size() != first.inputs.size()) return false;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const TensorType& a = first.inputs[i].type();
    const TensorType& b = r.inputs[i].type();
    if (a.dtype != b.dtype || a.shape.size() != b.shape.size() ||
        !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)) {
      return false;
    }
  }
  return true;
}

bool DynamicBatcher::Core::FrontBatch(size_t* take, int64_t* rows) const {
  *take = 0;
  *rows = 0;
  for (; *take < queue_.size(); ++*take) {
    if (*take > 0 && !Joins(queue_.front(), queue_[*take])) break;
    if (*rows + queue_[*take].rows > config_.max_batch_size) break;
    *rows += queue_[*take].rows;
  }
  // Full, or the next request cannot join: waiting cannot grow it.
  return *rows >= target_rows_ || *take < queue_.size();
}

int64_t DynamicBatcher::Core::PaddedRows(int64_t rows) const {
  if (config_.preferred_batch_sizes.empty()) {
    int64_t bucket = 1;
    while (bucket < rows) bucket *= 2;
    return std::min(bucket, config_.max_batch_size);
  }
  int64_t best = 0;
  for (int64_t p : config_.preferred_batch_sizes) {
    if (p >= rows && (best == 0 || p < best)) best = p;
  }
  return best == 0 ? rows : best;
}

void DynamicBatcher::Core::Loop() {
  const int64_t delay_ns = config_.max_queue_delay_us * 1000;
  mutex_.Lock();
  for (;;) {
    while (queue_.empty() && !stopping_) changed_.Wait(&mutex_);
    if (queue_.empty()) break;
    size_t take = 0;
    int64_t rows = 0;
    const bool ready = FrontBatch(&take, &rows);
    const int64_t wait_ns = queue_.front().arrived_ns + delay_ns - SteadyNowNs();
    if (!ready && !stopping_ && wait_ns > 0) {
      // Woken early only by what completes the batch (Submit).
      waiting_ = true;
      changed_.WaitWithTimeout(&mutex_, absl::Nanoseconds(wait_ns));
      waiting_ = false;
      continue;
    }
    std::vector<Request> batch;
    batch.reserve(take);
    for (size_t i = 0; i < take; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    mutex_.Unlock();
    Execute(std::move(batch));
    mutex_.Lock();
  }
  mutex_.Unlock();
}

void DynamicBatcher::Core::Execute(std::vector<Request> batch) {
  const int64_t start = SteadyNowNs();
  int64_t rows = 0;
  for (const Request& r : batch) {
    stats_->RecordQueue(start - r.arrived_ns);
    rows += r.rows;
  }
  const int64_t run_rows = PaddedRows(rows);
  auto fail_all = [&](const absl::Status& status) {
    for (Request& r : batch) r.done(status, {start - r.arrived_ns});
  };

  // One request that needs no padding runs on its own tensors.
  const bool alone = batch.size() == 1 && run_rows == rows;
  std::vector<std::vector<int64_t>> shapes;
  for (const runtime::Tensor& t : batch[0].inputs) {
    shapes.push_back(t.type().shape);
    shapes.back()[0] = run_rows;
  }
  std::vector<runtime::Tensor> joined;
  if (!alone) {
    std::vector<const std::vector<runtime::Tensor>*> requests;
    for (const Request& r : batch) requests.push_back(&r.inputs);
    absl::StatusOr<std::vector<runtime::Tensor>> j = JoinRows(requests, run_rows);
    if (!j.ok()) return fail_all(j.status());
    joined = *std::move(j);
  }
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : alone ? batch[0].inputs : joined) pointers.push_back(&t);
  const int64_t gathered = SteadyNowNs();

  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model = model_for_(shapes);
  if (!model.ok()) return fail_all(model.status());
  absl::StatusOr<runtime::RunResult> result = (*model)->Run(pointers);
  if (!result.ok()) return fail_all(result.status());
  const int64_t ran = SteadyNowNs();

  std::vector<runtime::RunResult> split;
  if (alone) {
    split.push_back(*std::move(result));
  } else {
    std::vector<int64_t> request_rows;
    for (const Request& r : batch) request_rows.push_back(r.rows);
    absl::StatusOr<std::vector<runtime::RunResult>> s =
        SplitRows(*result, request_rows, run_rows, (*model)->program().output_names);
    if (!s.ok()) return fail_all(s.status());
    split = *std::move(s);
  }
  stats_->RecordExecution(rows, gathered - start, ran - gathered, SteadyNowNs() - ran,
                          run_rows - rows);
  BatchTiming timing;
  timing.compute_input_ns = gathered - start;
  timing.compute_infer_ns = ran - gathered;
  timing.compute_output_ns = SteadyNowNs() - ran;
  timing.batch_rows = rows;
  for (size_t b = 0; b < batch.size(); ++b) {
    timing.queue_ns = start - batch[b].arrived_ns;
    timing.first_in_batch = b == 0;
    batch[b].done(std::move(split[b]), timing);
  }
}

}  // namespace kiln::engine
