#include "runtime/workspace_pool.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

TEST(WorkspacePoolTest, ReusesAFreedBlockForTheNextCall) {
  WorkspacePool pool(int64_t{1} << 30);
  void* first = pool.Allocate(40 << 20);
  ASSERT_NE(first, nullptr);
  pool.Free(first);
  void* second = pool.Allocate(40 << 20);
  EXPECT_EQ(second, first);
  pool.Free(second);
  const WorkspacePool::Stats stats = pool.stats();
  EXPECT_EQ(stats.system_allocations, 1);
  EXPECT_EQ(stats.reuses, 1);
  EXPECT_EQ(stats.live_bytes, 0);
  EXPECT_EQ(stats.retained_bytes, int64_t{40} << 20);
}

TEST(WorkspacePoolTest, BlocksAreAlignedAndDisjointWhileLive) {
  WorkspacePool pool(int64_t{1} << 30);
  std::vector<std::pair<char*, int64_t>> blocks;
  for (int64_t bytes : {1, 63, 64, 100, 4097, 1 << 20}) {
    char* p = static_cast<char*>(pool.Allocate(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, static_cast<int>(blocks.size()), bytes);  // writable to the end
    blocks.emplace_back(p, bytes);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      const bool apart = blocks[i].first + blocks[i].second <= blocks[j].first ||
                         blocks[j].first + blocks[j].second <= blocks[i].first;
      EXPECT_TRUE(apart) << i << " overlaps " << j;
    }
  }
  for (auto& [p, bytes] : blocks) pool.Free(p);
  EXPECT_EQ(pool.stats().live_bytes, 0);
}

TEST(WorkspacePoolTest, DoesNotServeASmallRequestFromAMuchLargerBlock) {
  WorkspacePool pool(int64_t{1} << 30);
  void* big = pool.Allocate(8 << 20);
  pool.Free(big);
  void* small = pool.Allocate(64 << 10);
  EXPECT_NE(small, big);
  EXPECT_EQ(pool.stats().reuses, 0);
  pool.Free(small);
}

TEST(WorkspacePoolTest, ReturnsBlocksBeyondTheRetainedLimitToTheSystem) {
  WorkspacePool pool(/*max_retained_bytes=*/1 << 20);
  void* a = pool.Allocate(768 << 10);
  void* b = pool.Allocate(768 << 10);
  pool.Free(a);
  pool.Free(b);  // 1.5 MB would exceed the limit: b goes back
  EXPECT_EQ(pool.stats().retained_bytes, 768 << 10);
}

TEST(WorkspacePoolTest, ConcurrentCallersNeverShareABlock) {
  WorkspacePool pool(int64_t{1} << 30);
  auto worker = [&](int id, bool* ok) {
    for (int i = 0; i < 2000; ++i) {
      auto* p = static_cast<int*>(pool.Allocate(4096 * (1 + i % 3)));
      for (int j = 0; j < 1024; ++j) p[j] = id;
      for (int j = 0; j < 1024; ++j) {
        if (p[j] != id) *ok = false;
      }
      pool.Free(p);
    }
  };
  bool ok1 = true, ok2 = true;
  std::thread t1(worker, 1, &ok1), t2(worker, 2, &ok2);
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1 && ok2);
  EXPECT_EQ(pool.stats().live_bytes, 0);
}

}  // namespace
}  // namespace kiln::runtime
