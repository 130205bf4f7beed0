// RedisConnection against a real redis-server: the commands' replies, the
// URL grammar, and what a stopped or restarted server looks like.
#include "engine/redis_connection.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/test_util/redis_server.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::RedisServer;

TEST(RedisUrlTest, ParsesHostPortAndDatabase) {
  auto a = ParseRedisUrl("redis://127.0.0.1:7001/3");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7001);
  EXPECT_EQ(a->db, 3);
  auto b = ParseRedisUrl("redis://cache.internal");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "cache.internal");
  EXPECT_EQ(b->port, 6379);
  EXPECT_EQ(b->db, 0);
  EXPECT_EQ(b->ToString(), "redis://cache.internal:6379/0");
}

TEST(RedisUrlTest, RejectsOtherSchemesPortsAndCredentials) {
  for (const char* url :
       {"http://h:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x", "redis://h:1/16",
        "redis://h:1/a", "redis://user:pw@h:1", "redis://h:1?db=2", "h:6379"}) {
    EXPECT_EQ(ParseRedisUrl(url).status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
}

class RedisConnectionTest : public ::testing::Test {
 protected:
  RedisAddress Address() { return *ParseRedisUrl(redis_.url()); }
  RedisServer redis_;
};

TEST_F(RedisConnectionTest, SetGetDeleteRoundTripBinaryValues) {
  ASSERT_TRUE(redis_.running());
  RedisConnection c(Address(), {});
  ASSERT_TRUE(c.Ping().ok());
  const std::string value("a\0b\r\nc\xff", 7);
  ASSERT_TRUE(c.Set("k", value, absl::Seconds(60)).ok());
  auto got = c.Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, value);
  auto missing = c.Get("nothing");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(*c.Delete("k"), true);
  EXPECT_EQ(*c.Delete("k"), false);
  EXPECT_FALSE(c.Get("k")->has_value());
}

TEST_F(RedisConnectionTest, TtlIsMillisecondsAndGetAndExpireExtendsIt) {
  RedisConnection c(Address(), {});
  ASSERT_TRUE(c.Set("short", "v", absl::Milliseconds(1500)).ok());
  const int pttl = std::stoi(redis_.Cli("PTTL short"));
  EXPECT_GT(pttl, 1000);
  EXPECT_LE(pttl, 1500);
  ASSERT_EQ(redis_.Cli("CONFIG RESETSTAT"), "OK\n");
  auto got = c.GetAndExpire("short", absl::Seconds(100));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->value_or(""), "v");
  EXPECT_GT(std::stoi(redis_.Cli("PTTL short")), 90000);
  auto absent = c.GetAndExpire("absent", absl::Seconds(1));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->has_value());
  EXPECT_EQ(redis_.Cli("EXISTS absent"), "0\n");
  // One command each, no separate PEXPIRE.
  const std::string stats = redis_.Cli("INFO commandstats");
  EXPECT_NE(stats.find("cmdstat_getex:calls=2,"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("cmdstat_pexpire"), std::string::npos) << stats;
  ASSERT_TRUE(c.Set("gone", "v", absl::Milliseconds(50)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(c.Get("gone")->has_value());
}

// The model store's state: no expiry, a swap of an existing key that says
// what was there (and writes nothing where there was none), a create-only set.
TEST_F(RedisConnectionTest, PersistentSetsHaveNoTtlReplaceOnlyExistingAndCreateOnlyNew) {
  RedisConnection c(Address(), {});
  ASSERT_TRUE(c.SetPersistent("state", "one").ok());
  EXPECT_EQ(std::stoi(redis_.Cli("PTTL state")), -1);  // -1: exists without expiry
  auto before = c.ReplaceExisting("state", "two");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, std::optional<std::string>("one"));
  EXPECT_EQ(**c.Get("state"), "two");
  EXPECT_EQ(std::stoi(redis_.Cli("PTTL state")), -1);
  auto fresh = c.ReplaceExisting("new", "v");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->has_value());
  EXPECT_FALSE(c.Get("new")->has_value());
  auto created = c.CreatePersistent("new", "v");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  EXPECT_EQ(std::stoi(redis_.Cli("PTTL new")), -1);
  auto again = c.CreatePersistent("new", "w");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  EXPECT_EQ(**c.Get("new"), "v");
}

TEST_F(RedisConnectionTest, SetIfAbsentIsExclusiveAndLeaseOpsCheckTheOwner) {
  RedisConnection a(Address(), {}), b(Address(), {});
  EXPECT_EQ(*a.SetIfAbsent("lease", "A", absl::Seconds(10)), true);
  EXPECT_EQ(*b.SetIfAbsent("lease", "B", absl::Seconds(10)), false);
  EXPECT_EQ(**b.Get("lease"), "A");
  // B cannot renew or release A's lease; A can.
  EXPECT_EQ(*b.ExpireIfEquals("lease", "B", absl::Seconds(100)), false);
  EXPECT_EQ(*b.DeleteIfEquals("lease", "B"), false);
  EXPECT_EQ(**a.Get("lease"), "A");
  EXPECT_EQ(*a.ExpireIfEquals("lease", "A", absl::Seconds(100)), true);
  EXPECT_GT(std::stoi(redis_.Cli("PTTL lease")), 90000);
  EXPECT_EQ(*a.DeleteIfEquals("lease", "A"), true);
  EXPECT_FALSE(a.Get("lease")->has_value());
  EXPECT_EQ(*b.SetIfAbsent("lease", "B", absl::Seconds(10)), true);
}

TEST_F(RedisConnectionTest, SelectsTheDatabaseOfTheUrl) {
  RedisAddress db2 = Address();
  db2.db = 2;
  RedisConnection c(db2, {});
  ASSERT_TRUE(c.Set("in2", "x", absl::Seconds(60)).ok());
  EXPECT_EQ(redis_.Cli("-n 2 GET in2"), "x\n");
  EXPECT_EQ(redis_.Cli("-n 0 EXISTS in2"), "0\n");
}

TEST_F(RedisConnectionTest, StoppedServerIsUnavailableAndRestartReconnects) {
  RedisConnection c(Address(), {});
  ASSERT_TRUE(c.Set("k", "v", absl::Seconds(60)).ok());
  redis_.Stop();
  EXPECT_EQ(c.Get("k").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c.Ping().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(redis_.Start());
  // No persistence: the restarted server is empty, and the same object talks to
  // it.
  auto got = c.Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  EXPECT_TRUE(c.Set("k", "w", absl::Seconds(60)).ok());
}

TEST_F(RedisConnectionTest, ConnectionFromBeforeARestartIsMadeAgainWithoutAnError) {
  RedisConnection c(Address(), {});
  ASSERT_TRUE(c.Set("k", "v", absl::Seconds(60)).ok());
  redis_.Stop();
  ASSERT_TRUE(redis_.Start());
  EXPECT_TRUE(c.Set("k", "w", absl::Seconds(60)).ok());
  EXPECT_EQ(**c.Get("k"), "w");
}

TEST_F(RedisConnectionTest, UnresponsiveServerTimesOutWithinTheCommandTimeout) {
  RedisTimeouts t;
  t.command = absl::Milliseconds(200);
  RedisConnection c(Address(), t);
  ASSERT_TRUE(c.Ping().ok());
  redis_.Pause();
  const absl::Time start = absl::Now();
  EXPECT_EQ(c.Get("k").status().code(), absl::StatusCode::kUnavailable);
  const absl::Duration took = absl::Now() - start;
  redis_.Resume();
  EXPECT_GE(took, absl::Milliseconds(150));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_TRUE(c.Ping().ok());
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

RedisHealthOptions HealthOptions() {
  RedisHealthOptions o;
  o.component = "test";
  o.what = "test store";
  o.meanwhile = "carrying on";
  o.retry_min = absl::Milliseconds(200);
  o.retry_max = absl::Milliseconds(400);
  return o;
}

// Connections sharing a RedisHealth back off together: after one fails the
// others are turned away without asking Redis (no error of their own) until
// the backoff lets one probe through; one warning per outage, an info line
// when Redis answers again.
TEST_F(RedisConnectionTest, SharedHealthBacksOffEveryConnectionAndWarnsOncePerOutage) {
  RedisHealth health(HealthOptions());
  RedisConnection a(Address(), {}, &health), b(Address(), {}, &health);
  ASSERT_TRUE(a.Ping().ok());
  redis_.Stop();
  ::testing::internal::CaptureStderr();
  absl::Status failed = a.Ping();
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(IsBackedOff(failed)) << failed;
  EXPECT_FALSE(health.available());
  EXPECT_EQ(health.errors(), 1);
  // Within the backoff: turned away at once, not counted.
  const absl::Time start = absl::Now();
  absl::Status refused = b.Get("k").status();
  EXPECT_TRUE(IsBackedOff(refused)) << refused;
  EXPECT_TRUE(IsBackedOff(a.Ping()));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(health.errors(), 1);
  // After it: one probe, which fails and doubles the backoff.
  absl::SleepFor(absl::Milliseconds(250));
  EXPECT_FALSE(IsBackedOff(b.Ping()));
  EXPECT_EQ(health.errors(), 2);
  EXPECT_TRUE(IsBackedOff(a.Ping()));
  absl::SleepFor(absl::Milliseconds(250));  // 400 ms now: still backed off
  EXPECT_TRUE(IsBackedOff(a.Ping()));
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Occurrences(log, "test store unavailable"), 1) << log;
  EXPECT_EQ(Occurrences(log, "carrying on"), 1) << log;
  EXPECT_EQ(Occurrences(log, "is back"), 0) << log;

  ASSERT_TRUE(redis_.Start());
  absl::SleepFor(absl::Milliseconds(450));
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(a.Ping().ok());
  EXPECT_TRUE(b.Ping().ok());
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(health.available());
  EXPECT_EQ(health.errors(), 2);
  EXPECT_EQ(Occurrences(log, "test store " + Address().ToString() + " is back"), 1) << log;

  // The next outage warns again.
  redis_.Stop();
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(a.Ping().ok());
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Occurrences(log, "test store unavailable"), 1) << log;
}

// A connection that must not lose its writes to a backoff still asks Redis
// (and its success ends the outage for the others).
TEST_F(RedisConnectionTest, AlwaysTryConnectionIgnoresTheBackoff) {
  RedisHealth health(HealthOptions());
  RedisConnection gated(Address(), {}, &health);
  RedisConnection writes(Address(), {}, &health, RedisGate::kAlwaysTry);
  redis_.Stop();
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(gated.Ping().ok());
  absl::Status tried = writes.Ping();
  EXPECT_FALSE(IsBackedOff(tried)) << tried;
  EXPECT_EQ(health.errors(), 2);
  ASSERT_TRUE(redis_.Start());
  EXPECT_TRUE(IsBackedOff(gated.Ping()));  // its backoff has not passed
  EXPECT_TRUE(writes.SetPersistent("k", "v").ok());
  EXPECT_TRUE(health.available());
  EXPECT_TRUE(gated.Ping().ok());
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace kiln::engine
