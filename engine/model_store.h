// The shared model store (--model-store): the models replicas serve, kept in
// Redis so that any replica can answer for a model compiled on another.
// Records are opaque bytes here (the server stores a CompileModelRequest
// without name and version); design and consistency in model_store.cc.
#ifndef KILN_ENGINE_MODEL_STORE_H_
#define KILN_ENGINE_MODEL_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/redis_connection.h"

namespace kiln::engine {

struct ModelStoreOptions {
  std::string url;                               // redis://HOST:PORT[/DB]
  int64_t max_model_bytes = int64_t{256} << 20;  // larger records are not stored
  // How long a replica trusts what it last read of a name's mapping.
  absl::Duration view_ttl = absl::Seconds(1);
  // Mapping reads sit in front of requests: short, as the kernel tier's.
  RedisTimeouts name_timeouts;
  // Records are whole models: their transfer may take longer.
  RedisTimeouts record_timeouts{absl::Milliseconds(200), absl::Seconds(10)};
  // After a failed mapping read Redis is left alone this long, doubling up
  // to retry_max, so that requests do not each wait for a timeout.
  absl::Duration retry_min = absl::Milliseconds(250);
  absl::Duration retry_max = absl::Seconds(5);
  std::string key_prefix = "kiln:model:";
};

// What the store says of a name: a record's content key and version, or
// that the name was unloaded.
struct StoredName {
  std::string content_key;  // hex SHA-256 of the record; empty when removed
  int64_t version = 0;
  bool removed() const { return content_key.empty(); }
};

struct ModelStoreStats {
  int64_t published = 0;  // records and mappings written
  int64_t too_large = 0;  // records over max_model_bytes, not stored
  int64_t loads = 0;      // records loaded into this replica
  int64_t unloads = 0;    // names dropped because the store no longer maps them
  int64_t lookups = 0;    // mapping reads
  int64_t errors = 0;     // failed Redis commands
};

// What Resolve asks the server to do; each called for one name at a time.
struct ModelStoreHooks {
  std::function<bool(const std::string& name)> served;  // loaded here
  // Compile `record` and serve it under `name` at `version`.
  std::function<absl::Status(const std::string& name, int64_t version, const std::string& record)>
      load;
  std::function<void(const std::string& name)> unload;
};

// Thread-safe.
class ModelStore {
 public:
  // InvalidArgument for a bad URL; connects on first use.
  static absl::StatusOr<std::unique_ptr<ModelStore>> Create(ModelStoreOptions options);

  static std::string ContentKey(absl::string_view record);

  // Stores `record` under its content key and maps `name` to it at
  // `version`. ResourceExhausted for a record over the bound (logged once per
  // process); Unavailable when Redis is.
  absl::Status Publish(const std::string& name, int64_t version, absl::string_view record);
  // Marks `name` unloaded for every replica (a tombstone; the record stays:
  // others may share it); true when it mapped a record, or when this replica
  // served it from the store and the store has lost it. Writes nothing for a
  // name the store never had.
  absl::StatusOr<bool> Remove(const std::string& name);
  // Brings this replica's copy of `name` in line with the store: loads the
  // mapped record when the name is not served here or serves another
  // record, unloads a name the store marks removed. Does nothing while the last
  // read is younger than view_ttl. Concurrent calls for a name not served
  // here wait for one load (single-flight). Redis failing leaves local
  // state as it is (OK); a failed load's status is returned.
  // A call waiting on another's load gives up at `deadline`
  // (DeadlineExceeded; the load goes on).
  absl::Status Resolve(const std::string& name, const ModelStoreHooks& hooks,
                       absl::Time deadline = absl::InfiniteFuture());

  // The mapping as Redis holds it now; nullopt: the store never heard of
  // the name (or lost it: a Redis flushed or restarted without persistence).
  absl::StatusOr<std::optional<StoredName>> Lookup(const std::string& name);

  ModelStoreStats stats() const;
  int64_t max_model_bytes() const { return options_.max_model_bytes; }

 private:
  // This replica's view of one name.
  struct View {
    std::string content_key;  // the record served here ("": none from the store)
    absl::Time checked = absl::InfinitePast();
  };
  struct Flight {
    absl::Notification done;
    absl::Status status;
  };

  ModelStore(ModelStoreOptions options, const RedisAddress& address);
  absl::Status ResolveNow(const std::string& name, const ModelStoreHooks& hooks);

  const ModelStoreOptions options_;
  // Redis's availability as both connections saw it (backoff, warning).
  RedisHealth health_;
  // Mapping reads, which wait out a backoff and must not wait behind a large
  // record's transfer.
  RedisConnection names_;
  // Records, and the writes a backoff must not lose (a publish, an unload).
  RedisConnection records_;
  mutable absl::Mutex mutex_;
  std::map<std::string, View> views_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mutex_);
  ModelStoreStats stats_ ABSL_GUARDED_BY(mutex_);
  bool logged_too_large_ ABSL_GUARDED_BY(mutex_) = false;
  int64_t bad_records_ ABSL_GUARDED_BY(mutex_) = 0;  // not hashing to their key
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_MODEL_STORE_H_
