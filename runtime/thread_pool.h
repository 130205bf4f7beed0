// The pool generated kernels run their parallel loops on, and the C entry
// point they call (declared in compiler/lower/loop_ir.h's ABI note).
#ifndef KILN_RUNTIME_THREAD_POOL_H_
#define KILN_RUNTIME_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

// Fixed workers; ParallelFor splits a range into chunks (a few per thread)
// that the caller and the workers claim as they come, so a worker that wakes
// late takes fewer instead of holding everyone up. Between jobs a worker
// spins for a while before it sleeps: a model runs dozens of parallel loops
// back to back, and a futex wake-up per loop (tens of microseconds on this
// VM) cost more than the small loops themselves. Calls from inside a body
// run inline.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  void ParallelFor(int64_t extent, const std::function<void(int64_t, int64_t)>& body);

 private:
  using Body = std::function<void(int64_t, int64_t)>;

  void WorkerLoop();
  // Runs chunks of job `generation` until none is left to claim.
  void RunClaims(uint32_t generation);

  std::vector<std::thread> workers_;
  // generation << 32 | index of the next unclaimed chunk. A claim is a
  // compare-exchange on both, so a worker still holding an old generation
  // can never take a chunk of the next job.
  std::atomic<uint64_t> claim_{0};
  // The current job's fields: written before its generation is published,
  // stable until all of its chunks are done.
  std::atomic<const Body*> body_{nullptr};
  std::atomic<int64_t> extent_{0};
  std::atomic<uint32_t> chunks_{0};
  std::atomic<uint32_t> done_{0};
  uint32_t generation_ = 0;  // the caller's counter, under job_mutex_

  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // for sleeping workers
  std::condition_variable work_ready_;
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
