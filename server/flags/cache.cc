// kiln-server flags, cache: the kernel cache, in memory and on disk (across
// restarts and replicas sharing the directory). One file per group: --help
// lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, cache_dir, "",
          "directory of the persistent kernel cache (default: $XDG_CACHE_HOME/kiln/kernels "
          "or ~/.cache/kiln/kernels; 'none' keeps kernels in memory only)");
ABSL_FLAG(int64_t, cache_max_bytes, int64_t{1} << 30, "disk budget of the kernel cache (LRU)");
ABSL_FLAG(int64_t, cache_memory_max_bytes, int64_t{256} << 20,
          "object bytes of kernels kept in memory; beyond it the least recently used that no "
          "loaded model holds are dropped");
ABSL_FLAG(double, cache_min_compile_ms, 0,
          "kernels that compile faster than this are not written to disk");
