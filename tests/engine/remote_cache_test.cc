// The remote kernel cache tier against a real redis-server: hits across
// caches with separate disks (as across replicas), bad entries detected and
// recompiled, Redis going away and coming back, and the compile lease.
#include "engine/remote_cache.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "common/sha256.h"
#include "compiler/driver/compile.h"
#include "engine/kernel_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/redis_server.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::Op;
using ::kiln::testing::RedisServer;
using runtime::JitEngine;
using ::testing::HasSubstr;

KernelSpec Spec(int64_t n) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {n}});
  g.AddOutput(Op(g, "exp", {Op(g, "neg", {x})}));
  auto p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_TRUE(p.ok());
  return p->kernels[0];
}

// A key and an entry for it that pass every check (the object is not code:
// these tests never link it).
KernelKey FakeKey(const std::string& seed) {
  KernelKey key;
  key.hex = Sha256Hex(seed);
  key.canonical = "p0:float32[4];n1=relu(p0);" + seed;
  key.target = TargetDescription::Host();
  key.options = "O2";
  return key;
}

DiskEntry FakeEntry(const KernelKey& key) {
  DiskEntry e;
  e.key = key;
  e.symbol = "kernel";
  e.ops = {"relu"};
  e.compile_ms = 12.5;
  e.object = std::string(1000, 'o');
  return e;
}

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.running());
    auto jit = JitEngine::Create();
    ASSERT_TRUE(jit.ok());
    jit_ = *jit;
  }
  void TearDown() override {
    for (const std::string& d : dirs_) std::system(("rm -rf " + d).c_str());
  }

  RemoteCacheOptions Options() {
    RemoteCacheOptions o;
    o.url = redis_.url();
    o.retry_min = absl::Milliseconds(100);
    o.retry_max = absl::Milliseconds(400);
    o.timeouts.command = absl::Milliseconds(300);
    return o;
  }

  std::unique_ptr<RemoteCache> Remote(RemoteCacheOptions o) {
    auto r = RemoteCache::Create(std::move(o));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }

  // A replica: its own disk directory, the shared Redis.
  std::unique_ptr<KernelCache> Replica() {
    char tmpl[] = "/tmp/kiln_remote_cache_testXXXXXX";
    dirs_.push_back(::mkdtemp(tmpl));
    KernelCacheOptions o;
    o.dir = dirs_.back();
    o.remote = Options();
    return std::make_unique<KernelCache>(jit_, o);
  }

  // Waits (up to 5 s) until Redis holds the entry for `hex`.
  bool AwaitEntry(const std::string& hex) {
    for (int i = 0; i < 100; ++i) {
      if (redis_.Cli("EXISTS kiln:kernel:" + hex) == "1\n") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  static void ExpectKernelWorks(const CacheLookup& lookup, int64_t n) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.25f;
    void* args[] = {x.data(), y.data()};
    lookup.kernel->fn()(args);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::exp(-x[i]), 1e-6);
  }

  RedisServer redis_;
  std::shared_ptr<JitEngine> jit_;
  std::vector<std::string> dirs_;
};

TEST_F(RemoteCacheTest, RejectsBadUrlAndBounds) {
  RemoteCacheOptions o = Options();
  o.url = "http://127.0.0.1:1";
  EXPECT_EQ(RemoteCache::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.max_entry_bytes = 0;
  EXPECT_EQ(RemoteCache::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RemoteCacheTest, ReplicaWithEmptyDiskGetsRemoteHitAndKeepsItOnDisk) {
  auto a = Replica();
  auto first = a->GetOrCompile(Spec(32), {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, CacheSource::kCompiled);
  ASSERT_TRUE(AwaitEntry(first->key_hex));
  // TTL set on write.
  EXPECT_GT(std::stoll(redis_.Cli("PTTL kiln:kernel:" + first->key_hex)), 3600 * 1000);

  // A hit restarts the TTL, in the read's own round trip (GETEX).
  ASSERT_EQ(redis_.Cli("PEXPIRE kiln:kernel:" + first->key_hex + " 60000"), "1\n");
  ASSERT_EQ(redis_.Cli("CONFIG RESETSTAT"), "OK\n");
  auto b = Replica();
  auto second = b->GetOrCompile(Spec(32), {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source, CacheSource::kRemote);
  EXPECT_GT(std::stoll(redis_.Cli("PTTL kiln:kernel:" + first->key_hex)), 3600 * 1000);
  const std::string commands = redis_.Cli("INFO commandstats");
  EXPECT_NE(commands.find("cmdstat_getex:calls=1,"), std::string::npos) << commands;
  EXPECT_EQ(commands.find("cmdstat_pexpire"), std::string::npos) << commands;
  EXPECT_EQ(commands.find("cmdstat_get:"), std::string::npos) << commands;
  EXPECT_EQ(second->compile_ms, first->compile_ms);  // the original compile
  ExpectKernelWorks(*second, 32);
  CacheStats stats = b->Stats();
  EXPECT_EQ(stats.compiles, 0);
  EXPECT_EQ(stats.remote_hits, 1);
  EXPECT_EQ(stats.remote.hits, 1);
  EXPECT_EQ(stats.remote.corrupt, 0);
  // One timed lookup (the hit), in engine::LatencyHistogram's buckets.
  EXPECT_EQ(stats.remote.lookups.count, 1);
  EXPECT_GT(stats.remote.lookups.sum_ns, 0);
  int64_t bucketed = 0;
  for (int64_t n : stats.remote.lookups.counts) bucketed += n;
  EXPECT_EQ(bucketed, 1);
  EXPECT_TRUE(stats.remote.available);
  EXPECT_EQ(::access((dirs_[1] + "/" + first->key_hex + ".kkc").c_str(), F_OK), 0)
      << "a remote hit is written to the local disk tier";

  // With Redis gone, that replica's restart is served by its own disk.
  redis_.Stop();
  KernelCacheOptions o;
  o.dir = dirs_[1];
  o.remote = Options();
  KernelCache restarted(jit_, o);
  auto third = restarted.GetOrCompile(Spec(32), {});
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->source, CacheSource::kDisk);
}

TEST_F(RemoteCacheTest, OneByteFlippedInRedisIsCountedDeletedAndRecompiled) {
  auto a = Replica();
  auto first = a->GetOrCompile(Spec(16), {});
  ASSERT_TRUE(first.ok());
  const std::string key = "kiln:kernel:" + first->key_hex;
  ASSERT_TRUE(AwaitEntry(first->key_hex));
  const int64_t size = std::stoll(redis_.Cli("STRLEN " + key));
  ASSERT_GT(size, 200);
  const std::string offset = std::to_string(size / 2);
  const std::string old = redis_.Cli("GETRANGE " + key + " " + offset + " " + offset);
  ASSERT_EQ(old.size(), 2u);  // the byte and redis-cli's newline
  ASSERT_EQ(redis_.Cli("SETRANGE " + key + " " + offset + " " + (old[0] == 'A' ? "B" : "A")),
            std::to_string(size) + "\n");

  ::testing::internal::CaptureStderr();
  auto b = Replica();
  auto again = b->GetOrCompile(Spec(16), {});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kCompiled);
  ExpectKernelWorks(*again, 16);
  EXPECT_THAT(log, HasSubstr("checksum mismatch"));
  CacheStats stats = b->Stats();
  EXPECT_EQ(stats.remote.corrupt, 1);
  EXPECT_EQ(stats.remote.hits, 0);
  EXPECT_EQ(stats.compiles, 1);
  // B's compile replaced the bad entry: a third replica gets a hit.
  ASSERT_TRUE(AwaitEntry(first->key_hex));
  auto c = Replica();
  auto third = c->GetOrCompile(Spec(16), {});
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->source, CacheSource::kRemote);
  EXPECT_EQ(c->Stats().remote.corrupt, 0);
}

TEST_F(RemoteCacheTest, ForeignAndOversizedEntriesAreMisses) {
  auto r = Remote(Options());
  const KernelKey want = FakeKey("want"), other = FakeKey("other");
  // Another key's whole, valid entry stored under this key.
  RedisConnection conn(*ParseRedisUrl(redis_.url()), {});
  ASSERT_TRUE(
      conn.Set("kiln:kernel:" + want.hex, EncodeDiskEntry(FakeEntry(other)), absl::Hours(1)).ok());
  std::unique_ptr<RemoteLease> lease;
  EXPECT_FALSE(r->LoadOrLease(want, absl::InfiniteFuture(), &lease).has_value());
  EXPECT_NE(lease, nullptr);  // a miss: this one compiles
  lease.reset();
  EXPECT_EQ(r->Stats().corrupt, 1);
  EXPECT_EQ(redis_.Cli("EXISTS kiln:kernel:" + want.hex), "0\n");

  // An entry beyond max_entry_bytes is neither written nor read.
  RemoteCacheOptions small = Options();
  small.max_entry_bytes = 500;
  auto s = Remote(small);
  s->Store(FakeEntry(want), nullptr);
  s->Flush();
  EXPECT_EQ(redis_.Cli("EXISTS kiln:kernel:" + want.hex), "0\n");
  EXPECT_EQ(s->Stats().write_drops, 1);
  r->Store(FakeEntry(want), nullptr);
  r->Flush();
  EXPECT_EQ(r->Stats().writes, 1);
  EXPECT_FALSE(s->LoadOrLease(want, absl::InfiniteFuture(), &lease).has_value());
  EXPECT_EQ(s->Stats().corrupt, 0);
  EXPECT_EQ(s->Stats().misses, 1);
  lease.reset();
  // Left in place for replicas with a larger bound.
  auto hit = r->LoadOrLease(want, absl::InfiniteFuture(), &lease);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->object, FakeEntry(want).object);
}

TEST_F(RemoteCacheTest, RedisDownDegradesWithOneWarningAndResumes) {
  auto a = Replica();
  redis_.Stop();
  ::testing::internal::CaptureStderr();
  for (int n = 3; n < 8; ++n) {
    auto r = a->GetOrCompile(Spec(n), {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kCompiled);
    ExpectKernelWorks(*r, n);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the first backoffs
  }
  std::string log = ::testing::internal::GetCapturedStderr();
  size_t warnings = 0;
  for (size_t at = 0; (at = log.find("remote kernel cache unavailable", at)) != std::string::npos;
       ++at) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << log;
  RemoteCacheStats down = a->Stats().remote;
  EXPECT_FALSE(down.available);
  EXPECT_GE(down.errors, 2);  // the backoff lets probes through
  EXPECT_EQ(down.writes, 0);

  ASSERT_TRUE(redis_.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past retry_max
  ::testing::internal::CaptureStderr();
  auto r = a->GetOrCompile(Spec(40), {});
  log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(log, HasSubstr("is back"));
  ASSERT_TRUE(AwaitEntry(r->key_hex));
  RemoteCacheStats up = a->Stats().remote;
  EXPECT_TRUE(up.available);
  EXPECT_EQ(up.errors, down.errors);
  EXPECT_GE(up.writes, 1);
}

TEST_F(RemoteCacheTest, UnresponsiveRedisCostsAtMostTheTimeouts) {
  auto a = Replica();
  redis_.Pause();
  const absl::Time start = absl::Now();
  auto r = a->GetOrCompile(Spec(24), {});
  const absl::Duration took = absl::Now() - start;
  redis_.Resume();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, CacheSource::kCompiled);
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_GE(a->Stats().remote.errors, 1);
}

TEST_F(RemoteCacheTest, WaiterGetsTheLeaseHoldersEntry) {
  auto holder = Remote(Options()), waiter = Remote(Options());
  const KernelKey key = FakeKey("k");
  std::unique_ptr<RemoteLease> lease;
  ASSERT_FALSE(holder->LoadOrLease(key, absl::InfiniteFuture(), &lease).has_value());
  ASSERT_NE(lease, nullptr);
  EXPECT_THAT(redis_.Cli("GET kiln:kernel:" + key.hex + ":lease"), HasSubstr(":"));

  std::atomic<bool> done{false};
  std::optional<DiskEntry> got;
  std::unique_ptr<RemoteLease> waiter_lease;
  std::thread t([&] {
    got = waiter->LoadOrLease(key, absl::InfiniteFuture(), &waiter_lease);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(done) << "the waiter must wait while the lease is held";
  holder->Store(FakeEntry(key), std::move(lease));
  t.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->object, FakeEntry(key).object);
  EXPECT_EQ(waiter_lease, nullptr);
  EXPECT_EQ(redis_.Cli("EXISTS kiln:kernel:" + key.hex + ":lease"), "0\n");
  RemoteCacheStats s = waiter->Stats();
  EXPECT_EQ(s.lease_waits, 1);
  EXPECT_EQ(s.lease_wait_hits, 1);
  EXPECT_EQ(s.leases_acquired, 0);
  EXPECT_EQ(holder->Stats().leases_acquired, 1);
}

TEST_F(RemoteCacheTest, DeadHoldersLeaseExpiresAndTheWaiterTakesOver) {
  const KernelKey key = FakeKey("dead");
  // A replica that took the lease and died: nobody renews it.
  ASSERT_EQ(redis_.Cli("SET kiln:kernel:" + key.hex + ":lease dead PX 700 NX"), "OK\n");
  auto waiter = Remote(Options());
  std::unique_ptr<RemoteLease> lease;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(waiter->LoadOrLease(key, absl::InfiniteFuture(), &lease).has_value());
  const absl::Duration took = absl::Now() - start;
  EXPECT_NE(lease, nullptr);
  EXPECT_GE(took, absl::Milliseconds(500));
  EXPECT_LT(took, absl::Seconds(3));
  RemoteCacheStats s = waiter->Stats();
  EXPECT_EQ(s.lease_waits, 1);
  EXPECT_EQ(s.leases_acquired, 1);
  EXPECT_NE(redis_.Cli("GET kiln:kernel:" + key.hex + ":lease"), "dead\n");
}

TEST_F(RemoteCacheTest, SlowHolderMakesTheWaiterCompileAtItsDeadline) {
  const KernelKey key = FakeKey("slow");
  ASSERT_EQ(redis_.Cli("SET kiln:kernel:" + key.hex + ":lease slow PX 60000 NX"), "OK\n");
  auto waiter = Remote(Options());
  std::unique_ptr<RemoteLease> lease;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(waiter->LoadOrLease(key, absl::Now() + absl::Milliseconds(400), &lease).has_value());
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(lease, nullptr);
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_EQ(waiter->Stats().lease_timeouts, 1);
}

TEST_F(RemoteCacheTest, HeldLeaseIsRenewedAndReleasedWhenDropped) {
  RemoteCacheOptions o = Options();
  o.lease_ttl = absl::Milliseconds(600);
  auto holder = Remote(o);
  const KernelKey key = FakeKey("renew");
  const std::string lease_key = "kiln:kernel:" + key.hex + ":lease";
  std::unique_ptr<RemoteLease> lease;
  ASSERT_FALSE(holder->LoadOrLease(key, absl::InfiniteFuture(), &lease).has_value());
  ASSERT_NE(lease, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 2.5 lease lifetimes
  EXPECT_EQ(redis_.Cli("EXISTS " + lease_key), "1\n");
  EXPECT_GT(std::stoll(redis_.Cli("PTTL " + lease_key)), 0);
  lease.reset();  // a failed compile: released at once
  EXPECT_EQ(redis_.Cli("EXISTS " + lease_key), "0\n");
}

TEST_F(RemoteCacheTest, ThreeReplicasMissingAtOnceCompileOnce) {
  std::vector<std::unique_ptr<KernelCache>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(Replica());
  std::vector<std::thread> threads;
  std::vector<CacheSource> sources(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto r = replicas[i]->GetOrCompile(Spec(64), {});
      ASSERT_TRUE(r.ok()) << r.status();
      ExpectKernelWorks(*r, 64);
      sources[i] = r->source;
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t compiles = 0, remote_hits = 0;
  for (const auto& r : replicas) {
    compiles += r->Stats().compiles;
    remote_hits += r->Stats().remote_hits;
  }
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(remote_hits, 2);
  EXPECT_EQ(std::count(sources.begin(), sources.end(), CacheSource::kCompiled), 1);
}

}  // namespace
}  // namespace kiln::engine
