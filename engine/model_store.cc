// The shared model store.
//
// Keys (prefix kiln:model:):
//
//   record:<sha256 hex of the record>  the record (model bytes + compile options), no expiry
//   name:<model name>                  "<content key> <version>", or "-" once unloaded;
//                                      no expiry
//
// Records are content-addressed: two replicas publishing the same model
// write the same key, and a name re-registered with other bytes points at a
// new record while the old one stays readable for anyone still loading it.
// Nothing expires (this is state, not a cache: that is why it is its own
// flag, --model-store, and not --remote-cache, whose Redis may evict under
// maxmemory: point both at one Redis only with maxmemory-policy volatile-lru,
// which evicts keys with a TTL alone); an unloaded name's record is left
// behind (Remove does not know who else maps it) until an operator flushes it.
// An unload is a tombstone, not a deleted key: a name the store does not know
// (a Redis restarted empty) is no reason for a replica to drop what it
// serves, an unload is. Tombstones never expire, so one is written only over
// a mapping (SET XX GET), or where the unloading replica served the name from
// a store that has lost it since (SET NX: a publish meanwhile stays); an
// unload of a name the store never had writes nothing.
//
// What is consistent when. Every replica keeps a view of each name it was
// asked for: the content key it serves ("" for none from the store) and
// when it last read the mapping. A request for a name whose view is older
// than view_ttl (1 s) reads the mapping once more (one small GET, on a
// connection of its own so that a large record's transfer does not delay
// it) and then:
//
//   tombstone, name served from the store here      -> unload it here
//   no key                                          -> nothing (serve what is here)
//   mapping equals what is served here              -> nothing
//   mapping differs or the name is not served here  -> fetch, check, load
//
// So: a model compiled on one replica is served by every replica from the
// first request that reaches it (that request waits for the load; kernels
// come from the cache tiers, compiled nowhere again). An unload, or a name
// re-registered with other bytes, reaches the other replicas at their first
// request for the name more than view_ttl after it: until then they answer
// with the old model, and while a replica loads the new record its other
// requests keep being served by the old one (only a replica serving nothing
// under the name makes them wait). Two replicas registering one name at once
// with different bytes: the last mapping written wins and the other replica
// turns to it at its next check. A CompileModel reads its name's mapping
// first (Lookup: the few bytes of "<content key> <version>", never the
// record), so `replace` and version numbers mean the same cluster-wide (a
// name another replica registered is ALREADY_EXISTS without replace, the
// same model takes its version). Versions: the store maps a name to one
// version: the last compiled, or of a repository's versions served beside
// each other the highest (what a request naming none gets there, whichever
// compile ends last); a replica loads that record as that version, alone.
// Redis unavailable: each replica serves what it has (a name it does not
// have answers NOT_FOUND); after a failed command (one warning per outage,
// RedisHealth) mapping reads ask Redis again only after a backoff (250 ms
// doubling to 5 s, whatever the name), so at most one request per backoff
// waits for a mapping read's timeout (500 ms). Publishes and unloads are
// tried all the same: a backoff must not lose them.
//
// Single-flight: the first request to find a view stale resolves the name;
// requests meanwhile for a name not served here wait for it (each up to its
// own deadline), the others are served by the current copy. The cost on the
// serving path: one GET of a few bytes per name per view_ttl.
#include "engine/model_store.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/human_bytes.h"
#include "common/log.h"
#include "common/sha256.h"

namespace kiln::engine {
namespace {

// Views kept for names never served here (a client's typos) beyond this are
// dropped, so that unknown names cannot grow the map without bound.
constexpr size_t kMaxViews = 4096;

// A name's value once unloaded.
constexpr char kTombstone[] = "-";

}  // namespace

absl::StatusOr<std::unique_ptr<ModelStore>> ModelStore::Create(ModelStoreOptions options) {
  absl::StatusOr<RedisAddress> address = ParseRedisUrl(options.url);
  if (!address.ok()) return address.status();
  return std::unique_ptr<ModelStore>(new ModelStore(std::move(options), *address));
}

ModelStore::ModelStore(ModelStoreOptions options, const RedisAddress& address)
    : options_(std::move(options)),
      health_({"model_store", "model store",
               "replicas serve the models they hold, names not loaded here are NOT_FOUND; "
               "retrying in the background",
               options_.retry_min, options_.retry_max}),
      names_(address, options_.name_timeouts, &health_, RedisGate::kBackOff),
      records_(address, options_.record_timeouts, &health_, RedisGate::kAlwaysTry) {}

std::string ModelStore::ContentKey(absl::string_view record) { return Sha256Hex(record); }

absl::Status ModelStore::Publish(const std::string& name, int64_t version,
                                 absl::string_view record) {
  if (static_cast<int64_t>(record.size()) > options_.max_model_bytes) {
    const std::string why = absl::StrCat(
        "model ", name, " is ", HumanBytes(record.size()), ", over the model store's bound of ",
        HumanBytes(options_.max_model_bytes), ": not stored, other replicas will not serve it");
    absl::MutexLock lock(&mutex_);
    ++stats_.too_large;
    if (!logged_too_large_) {
      logged_too_large_ = true;
      LogContext context;
      context.model = name;
      Log(LogLevel::kWarning, "model_store", why + " (logged once)", context);
    }
    return absl::ResourceExhaustedError(why);
  }
  const std::string key = ContentKey(record);
  absl::Status s = records_.SetPersistent(options_.key_prefix + "record:" + key, record);
  if (s.ok()) {
    s = records_.SetPersistent(options_.key_prefix + "name:" + name,
                               absl::StrCat(key, " ", version));
  }
  if (!s.ok()) return s;
  absl::MutexLock lock(&mutex_);
  ++stats_.published;
  views_[name] = View{key, absl::Now()};
  return absl::OkStatus();
}

absl::StatusOr<bool> ModelStore::Remove(const std::string& name) {
  const std::string key = options_.key_prefix + "name:" + name;
  bool served_from_store = false;
  {
    absl::MutexLock lock(&mutex_);
    auto view = views_.find(name);
    served_from_store = view != views_.end() && !view->second.content_key.empty();
  }
  // A tombstone only over a mapping (or an older tombstone): a name the
  // store never had needs none, and would keep one forever.
  absl::StatusOr<std::optional<std::string>> before = records_.ReplaceExisting(key, kTombstone);
  if (!before.ok()) return before.status();
  bool removed = before->has_value() && **before != kTombstone;
  if (!before->has_value() && served_from_store) {
    // The store lost the name (Redis restarted empty) while replicas may
    // serve it from the store: they need the tombstone. Create-only: a
    // publish that landed meanwhile is newer than this unload and stays.
    absl::StatusOr<bool> created = records_.CreatePersistent(key, kTombstone);
    if (!created.ok()) return created.status();
    removed = *created;
  }
  absl::MutexLock lock(&mutex_);
  // This replica reads the name again at its next request for it, with the
  // content key it had: a load from the store that overtook the local unload
  // (its mapping read before the tombstone) is dropped then, not served on.
  auto view = views_.find(name);
  if (view != views_.end()) view->second.checked = absl::InfinitePast();
  return removed;
}

absl::StatusOr<std::optional<StoredName>> ModelStore::Lookup(const std::string& name) {
  absl::StatusOr<std::optional<std::string>> value =
      names_.Get(options_.key_prefix + "name:" + name);
  if (!IsBackedOff(value.status())) {
    absl::MutexLock lock(&mutex_);
    ++stats_.lookups;
  }
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::optional<StoredName>();
  if (**value == kTombstone) return std::optional<StoredName>(StoredName{});
  std::vector<absl::string_view> parts = absl::StrSplit(**value, ' ');
  StoredName stored;
  if (parts.size() != 2 || parts[0].size() != 64 || !absl::SimpleAtoi(parts[1], &stored.version)) {
    return absl::DataLossError(absl::StrCat("the model store maps ", name, " to '", **value,
                                            "', not '<sha256> <version>'"));
  }
  stored.content_key = std::string(parts[0]);
  return std::optional<StoredName>(std::move(stored));
}

absl::Status ModelStore::Resolve(const std::string& name, const ModelStoreHooks& hooks,
                                 absl::Time deadline) {
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    absl::MutexLock lock(&mutex_);
    // A flight first: its view is fresh while the load it started runs.
    auto it = flights_.find(name);
    if (it != flights_.end()) {
      flight = it->second;
    } else {
      auto view = views_.find(name);
      if (view != views_.end() && absl::Now() - view->second.checked < options_.view_ttl) {
        return absl::OkStatus();
      }
      flight = std::make_shared<Flight>();
      flights_[name] = flight;
      leader = true;
    }
  }
  if (!leader) {
    if (hooks.served(name)) return absl::OkStatus();  // the current copy meanwhile
    if (!flight->done.WaitForNotificationWithDeadline(deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("the call's deadline passed while ", name,
                                                      " loads from the model store (it goes on)"));
    }
    return flight->status;
  }
  absl::Status status = ResolveNow(name, hooks);
  {
    absl::MutexLock lock(&mutex_);
    flight->status = status;
    flights_.erase(name);
    if (views_.size() > kMaxViews) {
      for (auto it = views_.begin(); it != views_.end();) {
        it = it->second.content_key.empty() ? views_.erase(it) : std::next(it);
      }
    }
  }
  flight->done.Notify();
  return status;
}

absl::Status ModelStore::ResolveNow(const std::string& name, const ModelStoreHooks& hooks) {
  absl::StatusOr<std::optional<StoredName>> mapped = Lookup(name);
  std::string served_key;
  {
    absl::MutexLock lock(&mutex_);
    View& view = views_[name];
    served_key = view.content_key;
    view.checked = absl::Now();  // a failure is not retried before view_ttl either
  }
  if (!mapped.ok()) return absl::OkStatus();          // serve what is here
  if (!mapped->has_value()) return absl::OkStatus();  // unknown here or lost: keep what is here
  const bool served = hooks.served(name);
  const StoredName& stored = **mapped;
  if (stored.removed()) {
    if (served_key.empty()) return absl::OkStatus();  // not the store's to unload
    if (served) hooks.unload(name);
    absl::MutexLock lock(&mutex_);
    views_[name].content_key.clear();
    if (served) ++stats_.unloads;
    return absl::OkStatus();
  }
  if (served && served_key == stored.content_key) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> record =
      records_.Get(options_.key_prefix + "record:" + stored.content_key);
  absl::Status status;
  if (!record.ok()) {
    status = record.status();
  } else if (!record->has_value()) {
    status = absl::NotFoundError(absl::StrCat("the model store maps ", name, " to record ",
                                              stored.content_key, ", which it does not hold"));
  } else if (ContentKey(**record) != stored.content_key) {
    {
      absl::MutexLock lock(&mutex_);
      ++bad_records_;
    }
    status = absl::DataLossError(
        absl::StrCat("model store record ", stored.content_key, " does not hash to its key"));
  } else {
    status = hooks.load(name, stored.version, **record);
  }
  absl::MutexLock lock(&mutex_);
  if (!status.ok()) return served ? absl::OkStatus() : status;  // else the old copy serves
  views_[name] = View{stored.content_key, absl::Now()};         // the view dates from the load
  ++stats_.loads;
  return absl::OkStatus();
}

ModelStoreStats ModelStore::stats() const {
  ModelStoreStats stats;
  {
    absl::MutexLock lock(&mutex_);
    stats = stats_;
    stats.errors = bad_records_;
  }
  stats.errors += health_.errors();
  return stats;
}

}  // namespace kiln::engine
