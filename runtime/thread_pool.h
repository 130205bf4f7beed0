// The pool generated kernels run their parallel loops on, and the C entry
// point they call (common/kernel_abi.h).
#ifndef KILN_RUNTIME_THREAD_POOL_H_
#define KILN_RUNTIME_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/kernel_abi.h"
#include "runtime/chunk_deadline.h"

namespace kiln::runtime {

// Fixed workers; ParallelFor splits a range into chunks (a few per thread),
// each thread owning a contiguous run of them: the caller the first, worker i
// the (i+1)-th. A thread runs its own chunks first, then claims what is left
// of the others', so a worker that wakes late takes fewer instead of holding
// everyone up. Ownership keeps data on its core from one parallel loop to
// the next: a loop reading what the previous one wrote over the same range
// finds it in its own L2 (on this VM, a line written by the other core reads
// at a third of the speed: 23-25 against 79-87 GB/s). Between jobs a worker
// spins for a while before it sleeps: a model runs dozens of parallel loops
// back to back, and a futex wake-up per loop (tens of microseconds on this
// VM) cost more than the small loops themselves. Calls from inside a body
// run inline. Under a ScopedChunkDeadline each chunk is skipped once the
// deadline has passed.
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

  // `participant`: 0 for the caller of ParallelFor, 1.. for the workers.
  void WorkerLoop(int participant);
  // Runs chunks of job `generation` until none is left to claim: the
  // participant's own first, then any left over.
  void RunClaims(uint32_t generation, int participant);

  std::vector<std::thread> workers_;
  // generation << 32 | a bit per claimed chunk. A claim is a
  // compare-exchange on both, so a worker still holding an old generation
  // can never take a chunk of the next job.
  std::atomic<uint64_t> claim_{0};
  // The current job's fields: written before its generation is published,
  // stable until all of its chunks are done.
  std::atomic<const Body*> body_{nullptr};
  std::atomic<int64_t> extent_{0};
  std::atomic<uint32_t> chunks_{0};
  std::atomic<uint32_t> done_{0};
  std::atomic<ChunkDeadline*> deadline_{nullptr};
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
// ParallelFor on the process-wide pool, for runtime code that splits work
// itself (a batch run as row chunks); kernels reach it through
// kiln_parallel_for.
void ParallelForOnPool(int64_t extent, const std::function<void(int64_t, int64_t)>& body);

}  // namespace kiln::runtime


#endif  // KILN_RUNTIME_THREAD_POOL_H_
