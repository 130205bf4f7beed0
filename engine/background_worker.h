// One thread that runs tasks in order, for work no caller waits on (a shape
// compiled while its first requests are served from a larger batch). Tasks
// still queued when the worker goes are told so instead of run, so whatever
// waits on them can be released.
#ifndef KILN_ENGINE_BACKGROUND_WORKER_H_
#define KILN_ENGINE_BACKGROUND_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace kiln::engine {

class BackgroundWorker {
 public:
  // `cancelled` is true when the worker is going and the task must only
  // clean up.
  using Task = std::function<void(bool cancelled)>;

  BackgroundWorker();
  // Finishes the running task, cancels the queued ones, joins.
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  void Post(Task task);

 private:
  void Loop();

  absl::Mutex mutex_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_BACKGROUND_WORKER_H_
