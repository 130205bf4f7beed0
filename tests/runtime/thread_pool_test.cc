#include "runtime/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

TEST(ThreadPoolTest, VisitsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t extent : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> seen(extent);
      pool.ParallelFor(extent, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[i]++;
      });
      for (int64_t i = 0; i < extent; ++i) {
        ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << " extent " << extent;
      }
    }
  }
}

TEST(ThreadPoolTest, NestedParallelForRunsInlineWithoutDeadlock) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

// The caller owns the first chunks of every job: it claims them before
// anything else, and a worker reaches them only after its own chunks and the
// caller's later ones, each held here for milliseconds. So the start of the
// range stays on the calling thread from one job to the next -- where a
// consumer loop finds what the producer loop wrote in that core's cache.
TEST(ThreadPoolTest, CallerRunsTheStartOfEveryRange) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int job = 0; job < 5; ++job) {
    std::vector<std::thread::id> ran_on(4);
    pool.ParallelFor(4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ran_on[i] = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    EXPECT_EQ(ran_on[0], caller) << "job " << job;
  }
}

// Back-to-back jobs from two callers at once: workers that spin between jobs
// and claim chunks by generation must never run a chunk twice, skip one, or
// run an old job's body for a new one.
TEST(ThreadPoolTest, BackToBackJobsFromConcurrentCallersVisitEachIndexOnce) {
  ThreadPool pool(3);
  auto caller = [&pool](int64_t extent, std::atomic<int>* failures) {
    std::vector<std::atomic<int>> seen(extent);
    for (int job = 0; job < 2000; ++job) {
      for (auto& s : seen) s = 0;
      pool.ParallelFor(extent, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[i]++;
      });
      for (auto& s : seen) {
        if (s.load() != 1) ++*failures;
      }
    }
  };
  std::atomic<int> failures{0};
  std::thread a(caller, 7, &failures), b(caller, 30, &failures);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
}

void AddRange(void* closure, int64_t begin, int64_t end) {
  auto* sum = static_cast<std::atomic<int64_t>*>(closure);
  for (int64_t i = begin; i < end; ++i) *sum += i;
}

TEST(ThreadPoolTest, KernelEntryPointCoversTheRange) {
  SetParallelThreads(2);
  std::atomic<int64_t> sum{0};
  kiln_parallel_for(AddRange, &sum, 100);
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
}

// Under a deadline the pool checks before each chunk: a deadline already
// passed runs nothing and says so; a distant one changes nothing.
TEST(ThreadPoolTest, APassedChunkDeadlineRunsNoChunkAndIsReported) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    ChunkDeadline passed(SteadyNowNs() - 1);
    std::atomic<int64_t> ran{0};
    {
      ScopedChunkDeadline scope(&passed);
      pool.ParallelFor(100, [&](int64_t b, int64_t e) { ran += e - b; });
    }
    EXPECT_EQ(ran.load(), 0);
    EXPECT_TRUE(passed.skipped_work());

    ChunkDeadline distant(SteadyNowNs() + int64_t{60} * 1000 * 1000 * 1000);
    {
      ScopedChunkDeadline scope(&distant);
      pool.ParallelFor(100, [&](int64_t b, int64_t e) { ran += e - b; });
    }
    EXPECT_EQ(ran.load(), 100);
    EXPECT_FALSE(distant.skipped_work());
    // Outside a scope nothing is checked.
    pool.ParallelFor(100, [&](int64_t b, int64_t e) { ran += e - b; });
    EXPECT_EQ(ran.load(), 200);
  }
}

// A deadline passing while a loop runs stops it at the next chunk: chunks of
// 40 ms each and a deadline 20 ms in; the ones started run out, no other
// starts, and later loops under the same deadline run nothing.
TEST(ThreadPoolTest, ADeadlinePassingMidLoopStopsAtTheNextChunk) {
  ThreadPool pool(2);
  ChunkDeadline deadline(SteadyNowNs() + 20 * 1000 * 1000);
  std::atomic<int> chunks_run{0};
  const auto start = std::chrono::steady_clock::now();
  {
    ScopedChunkDeadline scope(&deadline);
    // 2 threads x 2 chunks per thread: 4 chunks of the 4 indices.
    pool.ParallelFor(4, [&](int64_t, int64_t) {
      ++chunks_run;
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    });
    pool.ParallelFor(4, [&](int64_t, int64_t) { ++chunks_run; });
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(chunks_run.load(), 1);
  EXPECT_LE(chunks_run.load(), 2);  // one per thread, started before the deadline
  EXPECT_TRUE(deadline.skipped_work());
  EXPECT_LT(took, std::chrono::milliseconds(4 * 40));
}

}  // namespace
}  // namespace kiln::runtime
