// The remote kernel cache tier across real kiln-server processes: replicas
// with their own --cache-dir sharing one redis-server (started per test on a
// free loopback port), as a cluster's replicas do.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/replica_fixture.h"
#include "tests/server/server_process.h"
#include "tests/test_util/redis_server.h"

namespace kiln {
namespace {

using client::KilnClient;
using testing::RedisServer;
using testing::ServerProcess;

class RemoteCacheServiceTest : public testing::ReplicaFixture {
 protected:
  // A replica: its own cache directory, the shared Redis; its log in
  // <dir>/<name>.log.
  std::unique_ptr<ServerProcess> Replica(const std::string& name) {
    return std::make_unique<ServerProcess>(
        dir_ + "/" + name,
        std::vector<std::string>{"--remote-cache=" + redis_.url(), "--remote-cache-timeout-ms=300"},
        LogPath(name));
  }
};

TEST_F(RemoteCacheServiceTest, ModelCompiledOnOneReplicaIsServedByAnotherWithoutCompiling) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  auto ra = ca->Compile(Mlp("mlp"));
  ASSERT_TRUE(ra.ok()) << ra.status();
  std::set<std::string> keys;
  for (const auto& k : ra->report().kernels()) keys.insert(k.key());
  const int64_t n = static_cast<int64_t>(keys.size());
  ASSERT_GT(n, 1);
  EXPECT_EQ(Stats(*ca).compiles(), n);
  ASSERT_TRUE(AwaitRemoteWrites(*ca, n));

  auto rb = cb->Compile(Mlp("mlp"));
  ASSERT_TRUE(rb.ok()) << rb.status();
  for (const auto& k : rb->report().kernels()) {
    EXPECT_THAT(k.cache_source(), ::testing::AnyOf("remote hit", "memory hit")) << k.name();
  }
  const kiln::v1::GetCacheStatsResponse sb = Stats(*cb);
  EXPECT_EQ(sb.compiles(), 0);
  EXPECT_EQ(sb.remote().hits(), n);
  EXPECT_EQ(sb.remote().misses(), 0);
  EXPECT_EQ(sb.remote().corrupt_entries(), 0);
  EXPECT_TRUE(sb.remote().available());
  EXPECT_EQ(sb.remote().lookups(), n);
  EXPECT_GT(sb.remote().lookup_ms_total(), 0);
  EXPECT_EQ(sb.disk_entries(), n) << "remote hits are kept on B's own disk";
  ExpectReferenceOutput(*cb, "mlp");
  ExpectReferenceOutput(*ca, "mlp");
}

TEST_F(RemoteCacheServiceTest, RedisStoppedMidLoadKeepsServingWarnsOnceAndResumes) {
  auto a = Replica("a");
  auto ca = Connect(*a);
  ASSERT_NE(ca, nullptr);
  auto compiled = ca->Compile(Mlp("mlp"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::set<std::string> keys;
  for (const auto& k : compiled->report().kernels()) keys.insert(k.key());
  // Every kernel's write lands before Redis stops (the writes are
  // asynchronous: one still queued would count as a write while down).
  ASSERT_TRUE(AwaitRemoteWrites(*ca, static_cast<int64_t>(keys.size())));
  const int64_t writes_before = Stats(*ca).remote().writes();

  // Load: inference on a second connection for the whole test.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread load([&] {
    auto c = Connect(*a);
    while (!stop) {
      auto r = c->Infer("mlp", {{"x", x_}}, false);
      ++(r.ok() ? ok : failed);
    }
  });

  redis_.Stop();
  for (int batch : {1, 2, 3}) {  // new kernels while Redis is gone
    auto r = ca->Compile(Mlp("mlp_b" + std::to_string(batch), batch));
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& k : r->report().kernels()) {
      EXPECT_THAT(k.cache_source(), ::testing::AnyOf("compiled", "memory hit"));
    }
  }
  const kiln::v1::GetCacheStatsResponse down = Stats(*ca);
  EXPECT_FALSE(down.remote().available());
  EXPECT_GE(down.remote().errors(), 1);
  EXPECT_EQ(down.remote().writes(), writes_before);
  const int ok_while_down = ok;
  EXPECT_GT(ok_while_down, 0);

  ASSERT_TRUE(redis_.Start());
  // The tier probes after its backoff (at most 5 s); each new model is a lookup.
  bool resumed = false;
  for (int batch = 5; batch < 40 && !resumed; ++batch) {
    ASSERT_TRUE(ca->Compile(Mlp("mlp_b" + std::to_string(batch), batch)).ok());
    resumed = Stats(*ca).remote().available();
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_TRUE(resumed);
  EXPECT_TRUE(AwaitRemoteWrites(*ca, writes_before + 1));
  stop = true;
  load.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, ok_while_down);

  const std::string log = ReadFile(LogPath("a"));
  EXPECT_EQ(Count(log, "remote kernel cache unavailable"), 1) << log;
  EXPECT_EQ(Count(log, "is back"), 1) << log;
}

TEST_F(RemoteCacheServiceTest, EntryWithOneByteFlippedInRedisIsDetectedAndRecompiled) {
  auto a = Replica("a");
  auto ca = Connect(*a);
  ASSERT_NE(ca, nullptr);
  auto ra = ca->Compile(Mlp("mlp"));
  ASSERT_TRUE(ra.ok());
  std::set<std::string> keys;
  for (const auto& k : ra->report().kernels()) keys.insert(k.key());
  const int64_t n = static_cast<int64_t>(keys.size());
  ASSERT_TRUE(AwaitRemoteWrites(*ca, n));

  const std::string victim = *keys.begin();
  const std::string key = "kiln:kernel:" + victim;
  const int64_t size = std::stoll(redis_.Cli("STRLEN " + key));
  ASSERT_GT(size, 200);
  const std::string offset = std::to_string(size - 40);  // inside the object code
  const std::string old = redis_.Cli("GETRANGE " + key + " " + offset + " " + offset);
  ASSERT_EQ(old.size(), 2u);
  redis_.Cli("SETRANGE " + key + " " + offset + " " + (old[0] == 'Z' ? "Y" : "Z"));

  auto b = Replica("b");
  auto cb = Connect(*b);
  ASSERT_NE(cb, nullptr);
  auto rb = cb->Compile(Mlp("mlp"));
  ASSERT_TRUE(rb.ok()) << rb.status();
  for (const auto& k : rb->report().kernels()) {
    if (k.key() == victim) {
      EXPECT_EQ(k.cache_source(), "compiled") << k.name();
    } else {
      EXPECT_THAT(k.cache_source(), ::testing::AnyOf("remote hit", "memory hit")) << k.name();
    }
  }
  const kiln::v1::GetCacheStatsResponse sb = Stats(*cb);
  EXPECT_EQ(sb.remote().corrupt_entries(), 1);
  EXPECT_EQ(sb.remote().hits(), n - 1);
  EXPECT_EQ(sb.compiles(), 1);
  ExpectReferenceOutput(*cb, "mlp");
  EXPECT_THAT(ReadFile(LogPath("b")), ::testing::HasSubstr("checksum mismatch"));
}

TEST_F(RemoteCacheServiceTest, TwoReplicasCompilingTheSameNewModelAtOnceCompileItOnce) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  std::set<std::string> keys;
  absl::Mutex mutex;
  auto compile = [&](KilnClient* c) {
    auto r = c->Compile(Mlp("mlp"));
    ASSERT_TRUE(r.ok()) << r.status();
    absl::MutexLock lock(&mutex);
    for (const auto& k : r->report().kernels()) keys.insert(k.key());
  };
  std::thread ta(compile, ca.get()), tb(compile, cb.get());
  ta.join();
  tb.join();
  const kiln::v1::GetCacheStatsResponse sa = Stats(*ca), sb = Stats(*cb);
  const int64_t n = static_cast<int64_t>(keys.size());
  ASSERT_GT(n, 1);
  EXPECT_EQ(sa.compiles() + sb.compiles(), n)
      << "leases: A took " << sa.remote().leases_acquired() << ", waited "
      << sa.remote().lease_waits() << "; B took " << sb.remote().leases_acquired() << ", waited "
      << sb.remote().lease_waits();
  EXPECT_EQ(sa.remote().hits() + sb.remote().hits(), n);
  EXPECT_EQ(sa.remote().lease_timeouts() + sb.remote().lease_timeouts(), 0);
  // Every compile was made under a lease.
  EXPECT_GE(sa.remote().leases_acquired() + sb.remote().leases_acquired(), n);
  std::cout << "kernels " << n << ": A compiled " << sa.compiles() << " (waited "
            << sa.remote().lease_waits() << "), B compiled " << sb.compiles() << " (waited "
            << sb.remote().lease_waits() << ")\n";
  ExpectReferenceOutput(*ca, "mlp");
  ExpectReferenceOutput(*cb, "mlp");
}

}  // namespace
}  // namespace kiln
