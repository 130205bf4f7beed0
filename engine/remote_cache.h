// The remote kernel cache tier: compiled kernels in Redis, shared by every
// replica pointed at it (--remote-cache), behind memory and the local disk;
// and the Redis lease that lets replicas missing the same kernel at once
// compile it once. Design, consistency and failure modes in remote_cache.cc.
#ifndef KILN_ENGINE_REMOTE_CACHE_H_
#define KILN_ENGINE_REMOTE_CACHE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/cache_key.h"
#include "engine/disk_cache.h"
#include "engine/latency_histogram.h"
#include "engine/redis_connection.h"

namespace kiln::engine {

struct RemoteCacheOptions {
  std::string url;                              // redis://HOST:PORT[/DB]
  absl::Duration ttl = absl::Hours(24 * 7);     // each write and hit restarts it
  int64_t max_entry_bytes = int64_t{64} << 20;  // larger ones are neither written nor read
  RedisTimeouts timeouts;
  int max_queued_writes = 64;  // beyond it writes are dropped (and counted)
  // A compile lease lives this long unless renewed (every third of it).
  absl::Duration lease_ttl = absl::Seconds(10);
  // How long a replica waits on another's compile before compiling itself
  // (the caller's deadline may cut it shorter).
  absl::Duration max_lease_wait = absl::Seconds(120);
  absl::Duration poll_interval = absl::Milliseconds(50);
  // After a failure Redis is left alone this long, doubling up to retry_max.
  absl::Duration retry_min = absl::Milliseconds(250);
  absl::Duration retry_max = absl::Seconds(5);
  std::string key_prefix = "kiln:kernel:";
};

struct RemoteCacheStats {
  bool enabled = false;
  bool available = false;  // false from a failure until a command succeeds again
  std::string address;
  int64_t hits = 0;     // verified entries read (also after waiting on a lease)
  int64_t misses = 0;   // lookups that found no entry
  int64_t errors = 0;   // failed or timed-out Redis commands
  int64_t corrupt = 0;  // entries that failed their checks (deleted, recompiled)
  int64_t writes = 0;
  int64_t write_drops = 0;      // queue full, Redis unavailable, or the entry too large
  int64_t leases_acquired = 0;  // this replica compiled for the cluster
  int64_t lease_waits = 0;      // waited on another replica's compile
  int64_t lease_wait_hits = 0;  // ... and got its entry
  int64_t lease_timeouts = 0;   // ... and compiled itself after all
  LatencyHistogram lookups;     // GETs of entries that Redis answered
};

class RemoteCache;

// This replica's right to compile a key for the cluster. Renewed in the
// background while held; released when destroyed (compile failed) or after
// its entry is written (RemoteCache::Store).
class RemoteLease {
 public:
  ~RemoteLease();
  RemoteLease(const RemoteLease&) = delete;
  RemoteLease& operator=(const RemoteLease&) = delete;

 private:
  friend class RemoteCache;
  RemoteLease(RemoteCache* owner, std::string key, std::string token)
      : owner_(owner), key_(std::move(key)), token_(std::move(token)) {}
  RemoteCache* owner_;
  std::string key_;
  std::string token_;
  bool released_ = false;
};

class RemoteCache {
 public:
  // InvalidArgument for a bad URL. Redis need not be up: the tier starts
  // unavailable-until-proven and never blocks the caller for long.
  static absl::StatusOr<std::unique_ptr<RemoteCache>> Create(RemoteCacheOptions options);
  // Writes what is queued (each bounded by the command timeout), then stops.
  ~RemoteCache();

  // The verified entry for `key`, or nullopt. On a miss this process either
  // gets `*lease` (it compiles for the cluster, then calls Store), or waits
  // for the replica holding the lease until it writes the entry, dies (its
  // lease expires: then this one takes over) or `deadline` or max_lease_wait
  // pass (nullopt without a lease: compile locally). With Redis unavailable:
  // nullopt, no lease, no wait.
  std::optional<DiskEntry> LoadOrLease(const KernelKey& key, absl::Time deadline,
                                       std::unique_ptr<RemoteLease>* lease);
  // Queues `entry` for writing and returns; `lease`, if any, is released
  // after the write. Never blocks on Redis.
  void Store(DiskEntry entry, std::unique_ptr<RemoteLease> lease);
  RemoteCacheStats Stats() const;
  // Blocks until the write queue is empty (tests, shutdown).
  void Flush();

 private:
  friend class RemoteLease;
  struct Write {
    DiskEntry entry;
    std::unique_ptr<RemoteLease> lease;
  };

  explicit RemoteCache(RemoteCacheOptions options, RedisAddress address);
  std::string EntryKey(const std::string& hex) const { return options_.key_prefix + hex; }
  std::string LeaseKey(const std::string& hex) const { return EntryKey(hex) + ":lease"; }

  // One GET and the entry checks. `*failed` when Redis failed.
  std::optional<DiskEntry> Fetch(const KernelKey& key, bool* failed);
  void Release(RemoteLease& lease);
  void WriteLoop();
  void RenewLoop();

  const RemoteCacheOptions options_;
  const RedisAddress address_;
  // Redis's availability as all three connections saw it (backoff, warning).
  RedisHealth health_;
  // One connection per kind of caller, so none waits behind another's
  // commands: lookups and lease polls, background writes, lease renewals.
  RedisConnection lookups_;
  RedisConnection writes_;
  RedisConnection renewals_;

  mutable absl::Mutex mutex_;
  std::deque<Write> queue_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  std::map<std::string, std::string> held_ ABSL_GUARDED_BY(mutex_);  // lease key -> token
  int64_t token_counter_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  RemoteCacheStats stats_ ABSL_GUARDED_BY(mutex_);

  std::thread writer_;
  std::thread renewer_;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_REMOTE_CACHE_H_
