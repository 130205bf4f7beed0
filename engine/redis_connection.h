// One connection to a Redis server (hiredis underneath, its headers only in the
// .cc): the few commands the remote kernel cache tier and the model store
// need, each bounded by a timeout and returning absl::Status instead of
// hiredis's error fields; and RedisHealth, what a client's connections share.
#ifndef KILN_ENGINE_REDIS_CONNECTION_H_
#define KILN_ENGINE_REDIS_CONNECTION_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct redisContext;

namespace kiln::engine {

struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string ToString() const;  // "redis://host:port/db"
};

// `redis://HOST:PORT[/DB]` (PORT defaults to 6379 when absent); anything else,
// including user names, passwords and query strings, is InvalidArgument.
absl::StatusOr<RedisAddress> ParseRedisUrl(absl::string_view url);

struct RedisTimeouts {
  absl::Duration connect = absl::Milliseconds(200);
  absl::Duration command = absl::Milliseconds(500);
};

// What a client's connections to one Redis (the kernel tier's three, the
// model store's two) know together about it. After a failed command Redis is
// unavailable: left alone for a backoff (retry_min, doubling to retry_max)
// so that callers do not each wait for a timeout, then one command probes
// for all of them; a success ends the outage. One warning per outage, an
// info line when it ends. Thread-safe.
struct RedisHealthOptions {
  std::string component;  // of the log lines: "remote_cache"
  std::string what;       // "remote kernel cache"
  std::string meanwhile;  // the warning's tail: what serving does during the outage
  absl::Duration retry_min = absl::Milliseconds(250);
  absl::Duration retry_max = absl::Seconds(5);
};

class RedisHealth {
 public:
  explicit RedisHealth(RedisHealthOptions options) : options_(std::move(options)) {}

  // Whether a command may go to Redis now: always while it is available;
  // during an outage once per backoff (the probe, whose outcome the others
  // wait for).
  bool Admit() ABSL_LOCKS_EXCLUDED(mutex_);
  void Failed(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mutex_);
  void Succeeded(const RedisAddress& address) ABSL_LOCKS_EXCLUDED(mutex_);

  bool available() const ABSL_LOCKS_EXCLUDED(mutex_);
  // Failed commands (not those Admit turned away).
  int64_t errors() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  const RedisHealthOptions options_;
  mutable absl::Mutex mutex_;
  bool available_ ABSL_GUARDED_BY(mutex_) = true;
  absl::Time retry_at_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mutex_) = absl::ZeroDuration();
  int64_t errors_ ABSL_GUARDED_BY(mutex_) = 0;
};

// Whether `status` is a command RedisHealth turned away (no error of its own:
// Redis failed a moment ago and was not asked).
bool IsBackedOff(const absl::Status& status);

// Whether a connection's commands wait out its health's backoff.
enum class RedisGate {
  kBackOff,    // turned away (Unavailable, IsBackedOff) while Redis is backed off
  kAlwaysTry,  // sent regardless (writes that must not be lost to a backoff)
};

// Thread-safe: a mutex serializes commands, because a hiredis context is one
// socket with one reply stream and must not be shared unguarded. Callers that
// must not wait behind each other (lookups vs. background writes) hold one
// connection each. The connection is made on first use and made again on the
// command after any failure; a connection the server closed meanwhile (a
// restart) is made again and the command retried once. hiredis writes with
// write(2): the process must ignore SIGPIPE (kiln-server does).
// Every failure is Unavailable (connect, I/O, timeout) or Internal (an error
// reply, which is our bug or a foreign server). With a `health`, every
// command's outcome is reported to it and `gate` says whether commands wait
// out its backoff.
class RedisConnection {
 public:
  RedisConnection(RedisAddress address, RedisTimeouts timeouts, RedisHealth* health = nullptr,
                  RedisGate gate = RedisGate::kBackOff);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  const RedisAddress& address() const { return address_; }

  absl::Status Ping();
  // nullopt: no such key.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);
  // GETEX key PX ttl (Redis 6.2+): the value, its expiry restarted in the
  // same round trip; nullopt: no such key.
  absl::StatusOr<std::optional<std::string>> GetAndExpire(absl::string_view key,
                                                          absl::Duration ttl);
  // SET key value PX ttl.
  absl::Status Set(absl::string_view key, absl::string_view value, absl::Duration ttl);
  // SET key value, with no expiry (the model store's state, not a cache).
  absl::Status SetPersistent(absl::string_view key, absl::string_view value);
  // SET key value XX GET (Redis 6.2+): replaces an existing key's value,
  // with no expiry; the value before, or nullopt when there was no key (and
  // nothing was written).
  absl::StatusOr<std::optional<std::string>> ReplaceExisting(absl::string_view key,
                                                             absl::string_view value);
  // SET key value NX, with no expiry: true when this call created the key.
  absl::StatusOr<bool> CreatePersistent(absl::string_view key, absl::string_view value);
  // SET key value NX PX ttl: true when this call created the key.
  absl::StatusOr<bool> SetIfAbsent(absl::string_view key, absl::string_view value,
                                   absl::Duration ttl);
  // true when the key existed.
  absl::StatusOr<bool> Delete(absl::string_view key);
  // The lease operations: only while the key still holds `value` (a Lua
  // script, atomic on the server), so a holder whose lease expired and was
  // taken over cannot renew or release the new holder's lease.
  absl::StatusOr<bool> ExpireIfEquals(absl::string_view key, absl::string_view value,
                                      absl::Duration ttl);
  absl::StatusOr<bool> DeleteIfEquals(absl::string_view key, absl::string_view value);

 private:
  struct Reply;
  // Runs one command, connecting first if needed; drops the connection on
  // any I/O failure. A command that may not run twice (SET NX, SET GET) is
  // sent again after a stale connection only when its first send failed:
  // after an EOF on the reply, Redis may have run it.
  enum class Replay { kSafe, kOnlyIfUnsent };
  absl::StatusOr<Reply> Command(std::initializer_list<absl::string_view> args,
                                Replay replay = Replay::kSafe) ABSL_LOCKS_EXCLUDED(mutex_);
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void DropLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Command without the health bookkeeping.
  absl::StatusOr<Reply> Send(std::initializer_list<absl::string_view> args, Replay replay)
      ABSL_LOCKS_EXCLUDED(mutex_);

  const RedisAddress address_;
  const RedisTimeouts timeouts_;
  RedisHealth* const health_;
  const RedisGate gate_;
  absl::Mutex mutex_;
  redisContext* context_ ABSL_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_REDIS_CONNECTION_H_
