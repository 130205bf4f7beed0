// The pool generated kernels run their parallel loops on, and the C entry
// point they call (declared in compiler/lower/loop_ir.h's ABI note).
#ifndef KILN_RUNTIME_THREAD_POOL_H_
#define KILN_RUNTIME_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

// Fixed workers; ParallelFor splits a range into one chunk per thread, the
// caller running one chunk itself. Calls from inside a body run inline.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  void ParallelFor(int64_t extent, const std::function<void(int64_t, int64_t)>& body);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  // The current job: generation bumps per job; workers with index < chunks-1 take part.
  uint64_t generation_ = 0;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t extent_ = 0;
  int chunks_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  // One job at a time: concurrent callers queue here.
  std::mutex job_mutex_;
};

// Sets the size of the process-wide pool kernels use (>= 1). Not to be called
// while kernels run.
void SetParallelThreads(int num_threads);
int GetParallelThreads();

}  // namespace kiln::runtime

extern "C" void kiln_parallel_for(void (*body)(void*, int64_t, int64_t), void* closure,
                                  int64_t extent);

#endif  // KILN_RUNTIME_THREAD_POOL_H_
