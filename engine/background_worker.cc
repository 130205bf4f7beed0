#include "engine/background_worker.h"

#include <utility>

namespace kiln::engine {

BackgroundWorker::BackgroundWorker() : thread_([this] { Loop(); }) {}

BackgroundWorker::~BackgroundWorker() {
  std::deque<Task> cancelled;
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    cancelled.swap(tasks_);
  }
  thread_.join();
  for (Task& task : cancelled) task(/*cancelled=*/true);
}

void BackgroundWorker::Post(Task task) {
  {
    absl::MutexLock lock(&mutex_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      return;
    }
  }
  task(/*cancelled=*/true);
}

void BackgroundWorker::Loop() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mutex_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) {
        return stopping_ || !tasks_.empty();
      };
      mutex_.Await(absl::Condition(&ready));
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task(/*cancelled=*/false);
  }
}

}  // namespace kiln::engine
