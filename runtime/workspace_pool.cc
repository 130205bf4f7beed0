#include "runtime/workspace_pool.h"

#include <algorithm>
#include <cstdlib>

#include "common/large_block.h"

namespace kiln::runtime {
namespace {

// Sizes are rounded up so that blocks of nearly equal requests are
// interchangeable: to 64 bytes (the alignment), and to whole pages above one.
int64_t RoundedSize(int64_t bytes) {
  constexpr int64_t kPage = 4096;
  const int64_t at_least = std::max<int64_t>(bytes, 64);
  const int64_t unit = at_least > kPage ? kPage : 64;
  return (at_least + unit - 1) / unit * unit;
}

}  // namespace

WorkspacePool::WorkspacePool(int64_t max_retained_bytes)
    : max_retained_bytes_(max_retained_bytes) {}

WorkspacePool::~WorkspacePool() {
  absl::MutexLock lock(&mutex_);
  for (auto& [size, block] : free_) std::free(block);
  // Live blocks belong to kernels still running; they are theirs to free.
}

void* WorkspacePool::Allocate(int64_t bytes) {
  const int64_t size = RoundedSize(bytes);
  {
    absl::MutexLock lock(&mutex_);
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      void* block = it->second;
      const int64_t kept = it->first;
      free_.erase(it);
      stats_.retained_bytes -= kept;
      stats_.live_bytes += kept;
      ++stats_.reuses;
      live_.emplace(block, kept);
      return block;
    }
  }
  void* block = AllocateLargeBlock(static_cast<size_t>(size), abi::kWorkspaceAlignment);
  if (block == nullptr) return nullptr;
  absl::MutexLock lock(&mutex_);
  ++stats_.system_allocations;
  stats_.live_bytes += size;
  live_.emplace(block, size);
  return block;
}

void WorkspacePool::Free(void* block) {
  if (block == nullptr) return;
  {
    absl::MutexLock lock(&mutex_);
    auto it = live_.find(block);
    if (it == live_.end()) return;  // not ours: leave it alone rather than corrupt the heap
    const int64_t size = it->second;
    live_.erase(it);
    stats_.live_bytes -= size;
    if (stats_.retained_bytes + size <= max_retained_bytes_) {
      free_.emplace(size, block);
      stats_.retained_bytes += size;
      return;
    }
  }
  std::free(block);
}

WorkspacePool::Stats WorkspacePool::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

WorkspacePool& KernelWorkspacePool() {
  static WorkspacePool* pool = new WorkspacePool(int64_t{1} << 30);  // never destroyed:
  return *pool;  // kernels may run during static destruction of other objects
}

}  // namespace kiln::runtime

extern "C" void* kiln_workspace_alloc(int64_t bytes) {
  return kiln::runtime::KernelWorkspacePool().Allocate(bytes);
}

extern "C" void kiln_workspace_free(void* block) { kiln::runtime::KernelWorkspacePool().Free(block); }
