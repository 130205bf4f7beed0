// Scratch memory for kernels' temporaries (padded conv inputs, packed panels,
// index tables), kept from one call to the next, and the C entry points that
// generated code calls for it (common/kernel_abi.h).
//
// Why: a kernel allocates its temporaries on entry and frees them on return.
// glibc serves a block over its mmap threshold (at most 32 MB) with a fresh
// mapping every time, so each call faulted every page in again: a depthwise
// conv of mobilenet_v2 at batch 8 with a 40 MB padded input took 107 ms
// instead of 5. Like TVM's TVMBackendAllocWorkspace, the pool keeps freed
// blocks and hands them out again.
#ifndef KILN_RUNTIME_WORKSPACE_POOL_H_
#define KILN_RUNTIME_WORKSPACE_POOL_H_

#include <cstdint>
#include <map>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/kernel_abi.h"

namespace kiln::runtime {

class WorkspacePool {
 public:
  struct Stats {
    int64_t system_allocations = 0;  // blocks taken from the system allocator
    int64_t reuses = 0;              // requests served by a kept block
    int64_t retained_bytes = 0;      // bytes of free blocks kept for reuse
    int64_t live_bytes = 0;          // bytes handed out and not yet freed
  };

  // Keeps at most `max_retained_bytes` of free blocks; a block freed past
  // that goes back to the system.
  explicit WorkspacePool(int64_t max_retained_bytes);
  ~WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // A 64-byte aligned block of at least `bytes` bytes, or null when the
  // system is out of memory. Reuses the smallest kept block that fits and is
  // not more than twice the size asked for.
  void* Allocate(int64_t bytes);
  // Returns a block from Allocate (null is ignored).
  void Free(void* block);

  Stats stats() const;

 private:
  const int64_t max_retained_bytes_;
  mutable absl::Mutex mutex_;
  std::multimap<int64_t, void*> free_ ABSL_GUARDED_BY(mutex_);  // by size
  std::unordered_map<void*, int64_t> live_ ABSL_GUARDED_BY(mutex_);
  Stats stats_ ABSL_GUARDED_BY(mutex_);
};

// The process-wide pool generated kernels use (1 GiB kept at most).
WorkspacePool& KernelWorkspacePool();

// The bytes of the first request kiln_workspace_alloc could not serve on
// this thread since the last call, or 0; forgets it. A kernel refused its
// temporaries returns without running (common/kernel_abi.h), and its caller
// learns so here: without the check it would have written through null.
int64_t TakeRefusedWorkspaceBytes();

// ResourceExhausted: kernel `kernel` did not run, `bytes` of its temporaries
// refused.
absl::Status RefusedTemporariesStatus(absl::string_view kernel, int64_t bytes);

}  // namespace kiln::runtime


#endif  // KILN_RUNTIME_WORKSPACE_POOL_H_
