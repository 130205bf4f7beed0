#include "common/large_block.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kiln {

void* AllocateLargeBlock(size_t bytes, size_t alignment) {
  if (bytes < kHugePage) {
    // aligned_alloc wants a size that is a multiple of the alignment.
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  void* block = nullptr;
  if (posix_memalign(&block, kHugePage, bytes) != 0) return nullptr;
  // Its whole huge pages; the tail stays in small pages. Advice only: where
  // THP is off the block is as good as any other.
  madvise(block, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return block;
}

}  // namespace kiln
