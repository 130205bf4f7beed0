// kiln-server flags, cache: the kernel cache, in memory, on disk (across
// restarts and replicas sharing the directory) and in Redis (across replicas). One file per group:
// --help lists each file's flags under its name.
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
ABSL_FLAG(std::string, remote_cache, "",
          "redis://HOST:PORT[/DB]: a kernel cache tier shared by replicas, after memory and "
          "disk; replicas missing the same kernel at once compile it once (a Redis lease)");
ABSL_FLAG(int64_t, remote_cache_ttl_s, 7 * 24 * 3600,
          "remote cache entries expire this long after their last write or hit");
ABSL_FLAG(int64_t, remote_cache_max_entry_mb, 64,
          "larger kernels are not written to (nor read from) the remote cache");
ABSL_FLAG(int, remote_cache_connect_timeout_ms, 200, "connecting to Redis gives up after this");
ABSL_FLAG(int, remote_cache_timeout_ms, 500,
          "a Redis command gives up after this; the kernel is then compiled locally");
ABSL_FLAG(double, remote_cache_lease_wait_s, 120,
          "how long to wait for another replica compiling the same kernel before compiling it "
          "here (the request's deadline may cut it shorter)");
ABSL_FLAG(std::string, model_store, "",
          "redis://HOST:PORT[/DB]: models compiled here are stored there and served by every "
          "replica pointed at it; unload removes a name from all (may be --remote-cache's URL)");
ABSL_FLAG(int64_t, model_store_max_mb, 256, "larger models are not put in the model store");
ABSL_FLAG(int, model_store_view_ms, 1000,
          "a replica rereads a name's mapping in the model store at most this often (how long "
          "an unload or a re-registration takes to reach the other replicas)");
