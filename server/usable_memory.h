// How much memory this process may use: what the default budget for
// loaded models (--max-loaded-mb) is a share of.
#ifndef KILN_SERVER_USABLE_MEMORY_H_
#define KILN_SERVER_USABLE_MEMORY_H_

#include <cstdint>

namespace kiln::server {

// Physical memory, or the container's limit when lower (cgroup v2
// memory.max, else v1 memory.limit_in_bytes); 0 when neither can be read.
int64_t UsableMemoryBytes();

// 75% of UsableMemoryBytes (8 GiB when unknown). The other quarter is for
// what a budget for loaded models cannot count: each call's inputs and
// outputs, the tensor and workspace pools (up to 1 GiB each kept), the
// kernel cache (--cache-memory-max-bytes), gRPC messages in flight (up to
// --max-message-mb each) and the system itself.
int64_t DefaultMaxLoadedBytes();

}  // namespace kiln::server

#endif  // KILN_SERVER_USABLE_MEMORY_H_
