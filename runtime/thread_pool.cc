#include "runtime/thread_pool.h"

#include <algorithm>
#include <memory>

namespace kiln::runtime {
namespace {

thread_local bool in_parallel_region = false;

std::mutex& GlobalPoolMutex() {
  static std::mutex m;
  return m;
}

std::unique_ptr<ThreadPool>& GlobalPool() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}

ThreadPool& Pool() {
  std::lock_guard<std::mutex> lock(GlobalPoolMutex());
  auto& pool = GlobalPool();
  if (!pool) {
    pool = std::make_unique<ThreadPool>(
        std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  }
  return *pool;
}

void RunChunk(const std::function<void(int64_t, int64_t)>& body, int64_t extent, int chunks,
              int index) {
  const int64_t begin = extent * index / chunks;
  const int64_t end = extent * (index + 1) / chunks;
  if (begin < end) body(begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 0; i + 1 < std::max(1, num_threads); ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)>* body;
    int64_t extent;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index + 1 >= chunks_) continue;  // not needed for this job
      body = body_;
      extent = extent_;
      chunks = chunks_;
    }
    in_parallel_region = true;
    RunChunk(*body, extent, chunks, index + 1);
    in_parallel_region = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t extent, const std::function<void(int64_t, int64_t)>& body) {
  if (extent <= 0) return;
  const int chunks = static_cast<int>(std::min<int64_t>(extent, num_threads()));
  if (chunks <= 1 || in_parallel_region) {
    body(0, extent);
    return;
  }
  std::lock_guard<std::mutex> job(job_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    extent_ = extent;
    chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  in_parallel_region = true;
  RunChunk(body, extent, chunks, 0);
  in_parallel_region = false;
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return pending_ == 0; });
}

void SetParallelThreads(int num_threads) {
  std::lock_guard<std::mutex> lock(GlobalPoolMutex());
  GlobalPool() = std::make_unique<ThreadPool>(std::max(1, num_threads));
}

int GetParallelThreads() { return Pool().num_threads(); }

}  // namespace kiln::runtime

extern "C" void kiln_parallel_for(void (*body)(void*, int64_t, int64_t), void* closure,
                                  int64_t extent) {
  kiln::runtime::Pool().ParallelFor(
      extent, [body, closure](int64_t begin, int64_t end) { body(closure, begin, end); });
}
