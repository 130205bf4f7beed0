#include "engine/redis_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace kiln::engine {
namespace {

timeval TimeoutTimeval(absl::Duration d) {
  const int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
  timeval tv;
  tv.tv_sec = us / 1000000;
  tv.tv_usec = us % 1000000;
  return tv;
}

std::string Millis(absl::Duration d) {
  return std::to_string(std::max<int64_t>(absl::ToInt64Milliseconds(d), 1));
}

// Marks a command RedisHealth turned away.
constexpr char kBackedOffPayload[] = "kiln.redis.backed_off";

constexpr char kExpireIfEquals[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
constexpr char kDeleteIfEquals[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

}  // namespace

bool RedisHealth::Admit() {
  absl::MutexLock lock(&mutex_);
  if (available_) return true;
  const absl::Time now = absl::Now();
  if (now < retry_at_) return false;
  retry_at_ = now + backoff_;  // this caller probes; the others wait for its verdict
  return true;
}

void RedisHealth::Failed(const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  ++errors_;
  if (available_) {
    available_ = false;
    backoff_ = options_.retry_min;
    Log(LogLevel::kWarning, options_.component,
        absl::StrCat(options_.what, " unavailable (", status.message(), "); ", options_.meanwhile));
  } else {
    backoff_ = std::min(backoff_ * 2, options_.retry_max);
  }
  retry_at_ = absl::Now() + backoff_;
}

void RedisHealth::Succeeded(const RedisAddress& address) {
  absl::MutexLock lock(&mutex_);
  if (available_) return;
  available_ = true;
  Log(LogLevel::kInfo, options_.component,
      absl::StrCat(options_.what, " ", address.ToString(), " is back"));
}

bool RedisHealth::available() const {
  absl::MutexLock lock(&mutex_);
  return available_;
}

int64_t RedisHealth::errors() const {
  absl::MutexLock lock(&mutex_);
  return errors_;
}

bool IsBackedOff(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kBackedOffPayload).has_value();
}

struct RedisConnection::Reply {
  enum Kind { kNil, kString, kInteger, kStatus } kind = kNil;
  std::string text;  // kString, kStatus
  int64_t integer = 0;
};

std::string RedisAddress::ToString() const {
  return absl::StrCat("redis://", host, ":", port, "/", db);
}

absl::StatusOr<RedisAddress> ParseRedisUrl(absl::string_view url) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("remote cache URL '", url, "': ", why, " (expected redis://HOST:PORT[/DB])"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "redis://")) return bad("not a redis:// URL");
  RedisAddress address;
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    if (!absl::SimpleAtoi(rest.substr(slash + 1), &address.db) || address.db < 0 ||
        address.db > 15) {
      return bad("the database must be a number 0..15");
    }
    rest = rest.substr(0, slash);
  }
  if (rest.find_first_of("@?#") != absl::string_view::npos) {
    return bad("user names, passwords and options are not supported");
  }
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos) {
    if (!absl::SimpleAtoi(rest.substr(colon + 1), &address.port) || address.port < 1 ||
        address.port > 65535) {
      return bad("the port must be a number 1..65535");
    }
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return bad("no host");
  address.host = std::string(rest);
  return address;
}

RedisConnection::RedisConnection(RedisAddress address, RedisTimeouts timeouts, RedisHealth* health,
                                 RedisGate gate)
    : address_(std::move(address)), timeouts_(timeouts), health_(health), gate_(gate) {}

RedisConnection::~RedisConnection() {
  absl::MutexLock lock(&mutex_);
  DropLocked();
}

void RedisConnection::DropLocked() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

absl::Status RedisConnection::ConnectLocked() {
  context_ = redisConnectWithTimeout(address_.host.c_str(), address_.port,
                                     TimeoutTimeval(timeouts_.connect));
  if (context_ == nullptr || context_->err != 0) {
    std::string why = context_ ? context_->errstr : "out of memory";
    DropLocked();
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", address_.ToString(), ": ", why));
  }
  if (redisSetTimeout(context_, TimeoutTimeval(timeouts_.command)) != REDIS_OK) {
    DropLocked();
    return absl::UnavailableError(absl::StrCat("cannot set timeouts on ", address_.ToString()));
  }
  if (address_.db != 0) {
    const std::string db = std::to_string(address_.db);
    void* raw = redisCommand(context_, "SELECT %s", db.c_str());
    redisReply* reply = static_cast<redisReply*>(raw);
    const bool ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
    if (!ok) {
      DropLocked();
      return absl::UnavailableError(
          absl::StrCat("cannot select database on ", address_.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisConnection::Reply> RedisConnection::Command(
    std::initializer_list<absl::string_view> args, Replay replay) {
  if (health_ == nullptr) return Send(args, replay);
  if (gate_ == RedisGate::kBackOff && !health_->Admit()) {
    absl::Status refused = absl::UnavailableError(
        absl::StrCat(address_.ToString(), " failed a moment ago; not asked again yet"));
    refused.SetPayload(kBackedOffPayload, absl::Cord());
    return refused;
  }
  absl::StatusOr<Reply> reply = Send(args, replay);
  if (reply.ok()) {
    health_->Succeeded(address_);
  } else {
    health_->Failed(reply.status());
  }
  return reply;
}

absl::StatusOr<RedisConnection::Reply> RedisConnection::Send(
    std::initializer_list<absl::string_view> args, Replay replay) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (absl::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  absl::MutexLock lock(&mutex_);
  redisReply* reply = nullptr;
  for (int attempt = 0; reply == nullptr; ++attempt) {
    const bool reused = context_ != nullptr;
    if (!reused) {
      absl::Status connected = ConnectLocked();
      if (!connected.ok()) return connected;
    }
    reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (reply != nullptr) break;
    // I/O error or timeout: the reply stream is out of step, start afresh.
    const int err = context_->err;
    const int saved_errno = errno;
    std::string why = context_->errstr;
    DropLocked();
    // A connection made before the server restarted fails at once with EOF
    // (or a reset): one retry on a fresh connection, so that a restart costs
    // nothing. A timeout is not retried (it would double the wait).
    const bool unsent = err == REDIS_ERR_IO && saved_errno == EPIPE;
    const bool stale =
        reused && (replay == Replay::kSafe
                       ? err == REDIS_ERR_EOF ||
                             (err == REDIS_ERR_IO && (unsent || saved_errno == ECONNRESET))
                       : unsent);
    if (!stale || attempt > 0) {
      return absl::UnavailableError(
          absl::StrCat(address_.ToString(), ": ", why.empty() ? "no reply" : why));
    }
  }
  Reply out;
  absl::Status status;
  switch (reply->type) {
    case REDIS_REPLY_NIL:
      out.kind = Reply::kNil;
      break;
    case REDIS_REPLY_STRING:
      out.kind = Reply::kString;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      out.kind = Reply::kStatus;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = Reply::kInteger;
      out.integer = reply->integer;
      break;
    case REDIS_REPLY_ERROR:
      status = absl::InternalError(
          absl::StrCat(address_.ToString(), " answered ", std::string(reply->str, reply->len)));
      break;
    default:
      status = absl::InternalError(
          absl::StrCat(address_.ToString(), " answered an unexpected reply type ", reply->type));
  }
  freeReplyObject(reply);
  if (!status.ok()) return status;
  return out;
}

absl::Status RedisConnection::Ping() {
  absl::StatusOr<Reply> r = Command({"PING"});
  return r.status();
}

absl::StatusOr<std::optional<std::string>> RedisConnection::Get(absl::string_view key) {
  absl::StatusOr<Reply> r = Command({"GET", key});
  if (!r.ok()) return r.status();
  if (r->kind == Reply::kNil) return std::optional<std::string>();
  return std::optional<std::string>(std::move(r->text));
}

absl::StatusOr<std::optional<std::string>> RedisConnection::GetAndExpire(absl::string_view key,
                                                                         absl::Duration ttl) {
  const std::string ms = Millis(ttl);
  absl::StatusOr<Reply> r = Command({"GETEX", key, "PX", ms});
  if (!r.ok()) return r.status();
  if (r->kind == Reply::kNil) return std::optional<std::string>();
  return std::optional<std::string>(std::move(r->text));
}

absl::Status RedisConnection::Set(absl::string_view key, absl::string_view value,
                                  absl::Duration ttl) {
  const std::string ms = Millis(ttl);
  return Command({"SET", key, value, "PX", ms}).status();
}

absl::Status RedisConnection::SetPersistent(absl::string_view key, absl::string_view value) {
  return Command({"SET", key, value}).status();
}

absl::StatusOr<std::optional<std::string>> RedisConnection::ReplaceExisting(
    absl::string_view key, absl::string_view value) {
  absl::StatusOr<Reply> r = Command({"SET", key, value, "XX", "GET"}, Replay::kOnlyIfUnsent);
  if (!r.ok()) return r.status();
  if (r->kind == Reply::kNil) return std::optional<std::string>();
  return std::optional<std::string>(std::move(r->text));
}

absl::StatusOr<bool> RedisConnection::CreatePersistent(absl::string_view key,
                                                       absl::string_view value) {
  absl::StatusOr<Reply> r = Command({"SET", key, value, "NX"}, Replay::kOnlyIfUnsent);
  if (!r.ok()) return r.status();
  return r->kind == Reply::kStatus;  // "OK"; nil when the key exists
}

absl::StatusOr<bool> RedisConnection::SetIfAbsent(absl::string_view key, absl::string_view value,
                                                  absl::Duration ttl) {
  const std::string ms = Millis(ttl);
  absl::StatusOr<Reply> r = Command({"SET", key, value, "NX", "PX", ms}, Replay::kOnlyIfUnsent);
  if (!r.ok()) return r.status();
  return r->kind == Reply::kStatus;  // "OK"; nil when the key exists
}

absl::StatusOr<bool> RedisConnection::Delete(absl::string_view key) {
  absl::StatusOr<Reply> r = Command({"DEL", key});
  if (!r.ok()) return r.status();
  return r->integer > 0;
}

absl::StatusOr<bool> RedisConnection::ExpireIfEquals(absl::string_view key, absl::string_view value,
                                                     absl::Duration ttl) {
  const std::string ms = Millis(ttl);
  absl::StatusOr<Reply> r = Command({"EVAL", kExpireIfEquals, "1", key, value, ms});
  if (!r.ok()) return r.status();
  return r->integer == 1;
}

absl::StatusOr<bool> RedisConnection::DeleteIfEquals(absl::string_view key,
                                                     absl::string_view value) {
  absl::StatusOr<Reply> r = Command({"EVAL", kDeleteIfEquals, "1", key, value});
  if (!r.ok()) return r.status();
  return r->integer == 1;
}

}  // namespace kiln::engine
