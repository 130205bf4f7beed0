#include "runtime/workspace_pool.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/large_block.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kLargestRequest = int64_t{1} << 56;

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
  if (bytes < 0 || bytes > kLargestRequest) return nullptr;  // no system could, and rounding
  const int64_t size = RoundedSize(bytes);                   // would overflow
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

namespace {

// A kernel's temporaries are allocated on the thread that called it, before
// any parallel loop.
thread_local int64_t refused_workspace_bytes = 0;

void NoteRefusedWorkspace(int64_t bytes) {
  if (refused_workspace_bytes == 0) refused_workspace_bytes = std::max<int64_t>(bytes, 1);
}

}  // namespace

absl::Status RefusedTemporariesStatus(absl::string_view kernel, int64_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "kernel ", kernel, " did not run: the system refused ", bytes,
      " bytes for its temporaries (out of memory); the call's output was not written"));
}

int64_t TakeRefusedWorkspaceBytes() {
  const int64_t bytes = refused_workspace_bytes;
  refused_workspace_bytes = 0;
  return bytes;
}

WorkspacePool& KernelWorkspacePool() {
  static WorkspacePool* pool = new WorkspacePool(int64_t{1} << 30);  // never destroyed:
  return *pool;  // kernels may run during static destruction of other objects
}

}  // namespace kiln::runtime

extern "C" void* kiln_workspace_alloc(int64_t bytes) {
  void* block = kiln::runtime::KernelWorkspacePool().Allocate(bytes);
  if (block == nullptr) kiln::runtime::NoteRefusedWorkspace(bytes);
  return block;
}

extern "C" void kiln_workspace_free(void* block) { kiln::runtime::KernelWorkspacePool().Free(block); }
