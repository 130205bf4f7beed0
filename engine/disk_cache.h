// Compiled kernels on disk, one file per entry, so a restarted server (or a
// second one sharing the directory) loads kernels instead of compiling them.
// Layout, checks and the multi-process story are in disk_cache.cc.
#ifndef KILN_ENGINE_DISK_CACHE_H_
#define KILN_ENGINE_DISK_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/cache_key.h"

namespace kiln::engine {

struct DiskEntry {
  KernelKey key;
  std::string symbol;
  std::vector<std::string> ops;
  double compile_ms = 0;  // the original compile, for "time saved"
  int64_t created_unix_s = 0;
  std::string object;  // relocatable object code
};

struct DiskCacheStats {
  bool enabled = false;  // entries are read
  bool writing = false;  // and written (false while writes pause after a failure)
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t hits = 0;
  int64_t evictions = 0;
  int64_t corrupt = 0;  // detected, removed and recompiled
  int64_t write_failures = 0;
};

class DiskCache {
 public:
  // Uses `dir` (created if missing) and removes temp files left by dead
  // processes. When the directory cannot be created the cache is disabled
  // with one warning on stderr: the server serves from memory only. A
  // directory that cannot be written is still read. A failed write pauses
  // writes for `write_retry` (the disk may be full for a while); reads go on.
  static std::unique_ptr<DiskCache> Open(const std::string& dir, int64_t max_bytes,
                                         absl::Duration write_retry = absl::Seconds(30));

  bool enabled() const;
  // The entry for `key`, verified (magic, version, key, triple, checksum,
  // identity); nullopt on a miss. A corrupt, truncated or foreign file is
  // counted and removed. A hit refreshes the entry's access time (LRU).
  std::optional<DiskEntry> Load(const KernelKey& key);
  // Writes atomically (temp file, fsync, rename), then evicts least recently
  // used entries above the byte budget. A failed write is counted and pauses
  // writes (see Open).
  void Store(const DiskEntry& entry);
  DiskCacheStats Stats() const;

  // The file an entry with this key lives in.
  std::string PathFor(const std::string& key_hex) const;

 private:
  DiskCache(std::string dir, int64_t max_bytes, absl::Duration write_retry)
      : dir_(std::move(dir)), max_bytes_(max_bytes), write_retry_(write_retry) {}
  void Disable(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Writes pause until now + write_retry_; warns once per pause.
  void PauseWrites(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EvictOverBudget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CleanStaleTempFiles();

  const std::string dir_;
  const int64_t max_bytes_;
  const absl::Duration write_retry_;
  mutable absl::Mutex mutex_;
  bool enabled_ ABSL_GUARDED_BY(mutex_) = true;
  absl::Time writes_paused_until_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  int64_t hits_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t corrupt_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t write_failures_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t temp_counter_ ABSL_GUARDED_BY(mutex_) = 0;
};

// Encodes and decodes the entry file format (exposed for tests that corrupt it).
std::string EncodeDiskEntry(const DiskEntry& entry);
// nullopt when anything fails to verify; `why` says what.
std::optional<DiskEntry> DecodeDiskEntry(const std::string& bytes, std::string* why);

// How stored bytes relate to the key a lookup wants.
enum class EntryCheck {
  kMatch,          // *entry is the kernel for the key
  kCorrupt,        // fails a check (checksum, format, key, triple): `why` says which
  kOtherIdentity,  // a whole entry with the same hash and another identity (a collision)
};
// Every check a stored entry passes before its object is handed to the JIT;
// the disk and remote tiers both call it, so they accept exactly the same.
EntryCheck CheckEntry(const std::string& bytes, const KernelKey& key, DiskEntry* entry,
                      std::string* why);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_DISK_CACHE_H_
