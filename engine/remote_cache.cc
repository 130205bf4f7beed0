// The remote kernel cache tier (Redis) and compile-once-per-cluster leases.
//
// Where it sits: KernelCache looks in memory, then the local disk, then here,
// then compiles. Redis holds one string per kernel,
//   <prefix><64 hex key>         the disk entry's exact bytes (disk_cache.cc)
//   <prefix><64 hex key>:lease   "<host>:<pid>:<n>:<ns>" of the replica compiling it
// so the key contract, header and checksum are the disk tier's, and a remote
// entry passes CheckEntry — checksum, format version, key, triple, identity
// (which includes the Kiln and LLVM versions) — before its object reaches the
// JIT. One that fails is counted, deleted from Redis (only if it still holds
// the same bytes) and treated as a miss: it is never mapped as code. A hit is
// also written to the local disk tier, so a replica's next start needs no Redis.
//
// Compile once per cluster. On a miss a replica tries SET lease NX PX:
//
//   replica A: GET entry (miss) -> SET lease NX (won) -> compile -> queue write
//                                   renew every ttl/3     writer: SET entry PX, DEL lease
//   replica B: GET entry (miss) -> SET lease NX (lost) -> poll GET lease ... gone
//                                                       -> GET entry (hit)
//
// The winner re-reads the entry once after winning (another replica may have
// written it and released between our GET and SET). The lease is released
// only after the entry is written, so "lease gone" means "entry there" unless
// the holder failed, dropped the write or died; then the waiter finds no entry
// and tries for the lease itself. A dead holder stops renewing and its lease
// expires after lease_ttl. A waiter gives up at its own deadline or after
// max_lease_wait and compiles locally (counted as a lease timeout): a slow
// holder costs a duplicate compile, never a stuck request. Renewal and release
// only act while the lease still holds our token (Lua, atomic on the server),
// so a holder that lost its lease cannot extend or delete the next holder's.
//
// What is consistent when. Entries are immutable per key (same key, same
// inputs to codegen, byte-identical modulo compile time); any replica's write
// of a key is as good as any other's, last SET wins. A write is visible to
// every replica as soon as Redis acknowledges it; writes are asynchronous, so
// a replica that misses while another's write is queued compiles the kernel
// again unless that one still holds the lease (which is exactly the window the
// lease covers). Redis may evict or expire (ttl, restarted at each hit) any
// entry at any time: that is a miss, never an error.
//
// Failure modes. Every command has connect and command timeouts. A failed
// command marks Redis unavailable (RedisHealth, shared by the tier's three
// connections): one warning for the outage, an error count, and Redis is left
// alone for a backoff (retry_min doubling to retry_max); the first command
// after it is the probe, and its success resumes the tier (logged). While
// unavailable, lookups go straight to compiling, writes are dropped and
// counted, leases are not taken. Writes go through a bounded queue on one
// thread: a full queue drops (counted) instead of blocking a compile; serving
// a loaded model never touches Redis at all. Entries above max_entry_bytes
// are neither written nor read (a miss, left in Redis for replicas with a
// larger bound).
// One connection per caller kind (lookups, writer, renewer) keeps a large
// write from delaying a lookup.
#include "engine/remote_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kiln::engine {

RemoteLease::~RemoteLease() {
  if (!released_) owner_->Release(*this);
}

absl::StatusOr<std::unique_ptr<RemoteCache>> RemoteCache::Create(RemoteCacheOptions options) {
  absl::StatusOr<RedisAddress> address = ParseRedisUrl(options.url);
  if (!address.ok()) return address.status();
  if (options.max_entry_bytes < 1 || options.max_queued_writes < 1 ||
      options.ttl < absl::Seconds(1) || options.lease_ttl < absl::Milliseconds(300)) {
    return absl::InvalidArgumentError(
        "remote cache: entry size and queue must be positive, the ttl at least 1 s, the lease "
        "at least 300 ms");
  }
  return std::unique_ptr<RemoteCache>(new RemoteCache(std::move(options), *std::move(address)));
}

RemoteCache::RemoteCache(RemoteCacheOptions options, RedisAddress address)
    : options_(std::move(options)),
      address_(std::move(address)),
      health_({"remote_cache", "remote kernel cache",
               "serving and compiling from memory and disk, retrying in the background",
               options_.retry_min, options_.retry_max}),
      lookups_(address_, options_.timeouts, &health_),
      writes_(address_, options_.timeouts, &health_),
      renewals_(address_, options_.timeouts, &health_) {
  stats_.enabled = true;
  stats_.address = address_.ToString();
  writer_ = std::thread([this] { WriteLoop(); });
  renewer_ = std::thread([this] { RenewLoop(); });
}

RemoteCache::~RemoteCache() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  writer_.join();
  renewer_.join();
}

std::optional<DiskEntry> RemoteCache::Fetch(const KernelKey& key, bool* failed) {
  *failed = false;
  const std::string entry_key = EntryKey(key.hex);
  const auto start = std::chrono::steady_clock::now();
  // A used kernel stays: its ttl restarts in the same round trip as the
  // read (GETEX). One that then fails its checks is deleted below; one for
  // another identity or a larger bound keeps the restarted ttl (it is some
  // replica's).
  absl::StatusOr<std::optional<std::string>> got = lookups_.GetAndExpire(entry_key, options_.ttl);
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  if (!got.ok()) {
    *failed = true;
    return std::nullopt;
  }
  {
    absl::MutexLock lock(&mutex_);
    stats_.lookups.Add(ns);
  }
  if (!got->has_value()) return std::nullopt;
  const std::string& bytes = **got;
  // Written by a replica with a larger bound: not for us, but not bad either.
  if (static_cast<int64_t>(bytes.size()) > options_.max_entry_bytes) return std::nullopt;
  DiskEntry entry;
  std::string why;
  const EntryCheck check = CheckEntry(bytes, key, &entry, &why);
  if (check == EntryCheck::kCorrupt) {
    {
      absl::MutexLock lock(&mutex_);
      ++stats_.corrupt;
    }
    Log(LogLevel::kWarning, "remote_cache",
        absl::StrCat("deleting bad remote cache entry ", entry_key, " (", why,
                     "); the kernel is compiled again"));
    (void)lookups_.DeleteIfEquals(entry_key, bytes);  // unless rewritten meanwhile
    return std::nullopt;
  }
  if (check == EntryCheck::kOtherIdentity) return std::nullopt;
  {
    absl::MutexLock lock(&mutex_);
    ++stats_.hits;
  }
  return entry;
}

std::optional<DiskEntry> RemoteCache::LoadOrLease(const KernelKey& key, absl::Time deadline,
                                                  std::unique_ptr<RemoteLease>* lease) {
  lease->reset();
  bool failed = false;
  std::optional<DiskEntry> entry = Fetch(key, &failed);
  if (entry || failed) return entry;
  std::string token;
  {
    absl::MutexLock lock(&mutex_);
    ++stats_.misses;
    char host[64] = {0};
    ::gethostname(host, sizeof host - 1);
    token = absl::StrCat(host, ":", ::getpid(), ":", ++token_counter_, ":",
                         absl::ToUnixNanos(absl::Now()));
  }
  const std::string lease_key = LeaseKey(key.hex);
  const absl::Time give_up = std::min(deadline, absl::Now() + options_.max_lease_wait);
  bool waited = false;
  for (;;) {
    absl::StatusOr<bool> won = lookups_.SetIfAbsent(lease_key, token, options_.lease_ttl);
    if (!won.ok()) return std::nullopt;
    if (*won) {
      {
        absl::MutexLock lock(&mutex_);
        held_[lease_key] = token;
        ++stats_.leases_acquired;
      }
      std::unique_ptr<RemoteLease> held(new RemoteLease(this, lease_key, token));
      // Written and released between our GET and SET: no compile needed.
      entry = Fetch(key, &failed);
      if (entry) return entry;  // `held` releases the lease
      *lease = std::move(held);
      return std::nullopt;
    }
    if (!waited) {
      waited = true;
      absl::MutexLock lock(&mutex_);
      ++stats_.lease_waits;
    }
    // Another replica compiles: wait for its lease to go.
    bool lease_gone = false;
    while (!lease_gone && absl::Now() + options_.poll_interval < give_up) {
      absl::SleepFor(options_.poll_interval);
      absl::StatusOr<std::optional<std::string>> holder = lookups_.Get(lease_key);
      if (!holder.ok()) return std::nullopt;
      lease_gone = !holder->has_value();
    }
    if (!lease_gone) {
      absl::MutexLock lock(&mutex_);
      ++stats_.lease_timeouts;
      return std::nullopt;
    }
    entry = Fetch(key, &failed);
    if (failed) return std::nullopt;
    if (entry) {
      absl::MutexLock lock(&mutex_);
      ++stats_.lease_wait_hits;
      return entry;
    }
    // The holder failed or died without writing: try for the lease ourselves.
  }
}

void RemoteCache::Store(DiskEntry entry, std::unique_ptr<RemoteLease> lease) {
  Write w;
  w.entry = std::move(entry);
  w.lease = std::move(lease);
  absl::MutexLock lock(&mutex_);
  if (static_cast<int64_t>(queue_.size()) >= options_.max_queued_writes) {
    ++stats_.write_drops;
    if (w.lease) {
      // Releasing would need Redis on this thread: let the lease expire.
      held_.erase(w.lease->key_);
      w.lease->released_ = true;
    }
    return;
  }
  queue_.push_back(std::move(w));
}

void RemoteCache::Release(RemoteLease& lease) {
  lease.released_ = true;
  {
    absl::MutexLock lock(&mutex_);
    held_.erase(lease.key_);
  }
  if (!health_.available()) return;                         // it expires by itself
  (void)lookups_.DeleteIfEquals(lease.key_, lease.token_);  // a failure counts in health_
}

void RemoteCache::WriteLoop() {
  for (;;) {
    Write w;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](RemoteCache* c) { return !c->queue_.empty() || c->stopping_; }, this));
      if (queue_.empty()) return;
      w = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    const std::string bytes = EncodeDiskEntry(w.entry);
    bool written = false;
    if (static_cast<int64_t>(bytes.size()) <= options_.max_entry_bytes) {
      written = writes_.Set(EntryKey(w.entry.key.hex), bytes, options_.ttl).ok();
    }
    if (w.lease) {
      // After the write, so that waiters finding the lease gone find the entry.
      if (written) {
        w.lease->released_ = true;
        {
          absl::MutexLock lock(&mutex_);
          held_.erase(w.lease->key_);
        }
        (void)writes_.DeleteIfEquals(w.lease->key_, w.lease->token_);
      }
      w.lease.reset();  // not written: release now, the waiters compile themselves
    }
    absl::MutexLock lock(&mutex_);
    ++(written ? stats_.writes : stats_.write_drops);
    writing_ = false;
  }
}

void RemoteCache::RenewLoop() {
  absl::MutexLock lock(&mutex_);
  while (!stopping_) {
    mutex_.AwaitWithTimeout(absl::Condition(&stopping_), options_.lease_ttl / 3);
    if (stopping_ || held_.empty() || !health_.available()) continue;
    const std::map<std::string, std::string> held = held_;
    mutex_.Unlock();
    for (const auto& [key, token] : held) {
      if (!renewals_.ExpireIfEquals(key, token, options_.lease_ttl).ok()) break;
    }
    mutex_.Lock();
  }
}

void RemoteCache::Flush() {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(
      +[](RemoteCache* c) { return c->queue_.empty() && !c->writing_; }, this));
}

RemoteCacheStats RemoteCache::Stats() const {
  RemoteCacheStats stats;
  {
    absl::MutexLock lock(&mutex_);
    stats = stats_;
  }
  stats.available = health_.available();
  stats.errors = health_.errors();
  return stats;
}

}  // namespace kiln::engine
