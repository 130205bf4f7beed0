// Memory for large, long-lived or streamed blocks: weights, packed weights
// and the runtime's arenas.
//
// Blocks of kHugePage bytes or more start on a huge-page boundary and are
// marked MADV_HUGEPAGE before anything touches them, so where transparent
// huge pages are "madvise" (Debian's default) their pages fault in as 2 MiB
// ones. Streaming a conv's weights (resnet50's layer4 holds 9.4 MB per conv)
// otherwise takes a TLB miss every 4 KiB, and on a VM each miss walks two
// levels of page tables.
#ifndef KILN_COMMON_LARGE_BLOCK_H_
#define KILN_COMMON_LARGE_BLOCK_H_

#include <cstddef>

namespace kiln {

inline constexpr size_t kHugePage = size_t{2} << 20;

// `bytes` bytes aligned to `alignment` (a power of two, at most kHugePage),
// or null when out of memory. Free with std::free.
void* AllocateLargeBlock(size_t bytes, size_t alignment);

}  // namespace kiln

#endif  // KILN_COMMON_LARGE_BLOCK_H_
