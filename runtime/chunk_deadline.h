// A call's deadline as the kernel pool sees it: checked before each chunk of
// a parallel loop, so a long kernel stops at the next chunk once the call is
// past its deadline, instead of holding the server to the end (the executor
// alone checks between kernels). The kernel's output is then incomplete; the
// executor reports DeadlineExceeded and returns nothing of it.
#ifndef KILN_RUNTIME_CHUNK_DEADLINE_H_
#define KILN_RUNTIME_CHUNK_DEADLINE_H_

#include <atomic>
#include <cstdint>

#include "common/ms_since.h"

namespace kiln::runtime {

class ChunkDeadline {
 public:
  explicit ChunkDeadline(int64_t deadline_steady_ns) : deadline_ns_(deadline_steady_ns) {}

  // True once the deadline has passed (and from then on, without the clock).
  bool Passed() {
    if (passed_.load(std::memory_order_relaxed)) return true;
    if (SteadyNowNs() <= deadline_ns_) return false;
    passed_.store(true, std::memory_order_relaxed);
    return true;
  }
  // Whether a chunk was skipped for it.
  bool skipped_work() const { return skipped_.load(std::memory_order_acquire); }
  void MarkSkipped() { skipped_.store(true, std::memory_order_release); }

 private:
  const int64_t deadline_ns_;
  std::atomic<bool> passed_{false};
  std::atomic<bool> skipped_{false};
};

// While alive, parallel loops started on this thread check `deadline`
// before each chunk. Scopes do not nest.
class ScopedChunkDeadline {
 public:
  explicit ScopedChunkDeadline(ChunkDeadline* deadline);
  ~ScopedChunkDeadline();
  ScopedChunkDeadline(const ScopedChunkDeadline&) = delete;
  ScopedChunkDeadline& operator=(const ScopedChunkDeadline&) = delete;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CHUNK_DEADLINE_H_
