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
#include "tests/server/server_process.h"
#include "tests/test_util/redis_server.h"

namespace kiln {
namespace {

using client::KilnClient;
using testing::RedisServer;
using testing::ServerProcess;

class RemoteCacheServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.running());
    char tmpl[] = "/tmp/kiln_remote_cache_service_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto g = client::LoadGraphFile("examples/mlp.pbtxt");
    ASSERT_TRUE(g.ok()) << g.status();
    graph_ = *g;
    auto x = client::ReadNpyFile("examples/x.npy");
    auto y = client::ReadNpyFile("examples/mlp_expected.npy");
    ASSERT_TRUE(x.ok() && y.ok());
    x_ = *x;
    expected_ = *y;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // A replica: its own cache directory, the shared Redis; its log in
  // <dir>/<name>.log.
  std::unique_ptr<ServerProcess> Replica(const std::string& name) {
    return std::make_unique<ServerProcess>(
        dir_ + "/" + name,
        std::vector<std::string>{"--remote-cache=" + redis_.url(), "--remote-cache-timeout-ms=300"},
        LogPath(name));
  }
  std::string LogPath(const std::string& name) { return dir_ + "/" + name + ".log"; }

  std::unique_ptr<KilnClient> Connect(const ServerProcess& server) {
    EXPECT_GT(server.port(), 0) << "kiln-server did not start";
    auto c = KilnClient::Create("localhost:" + std::to_string(server.port()));
    EXPECT_TRUE(c.ok());
    return c.ok() ? *std::move(c) : nullptr;
  }

  // The example MLP served as `name`, its batch dim set to `batch` (each
  // batch size is a new set of kernels).
  kiln::v1::CompileModelRequest Mlp(const std::string& name, int batch = 4) {
    kiln::v1::CompileModelRequest r;
    *r.mutable_graph() = graph_;
    r.mutable_graph()->mutable_inputs(0)->set_dims(0, batch);
    r.set_model_name(name);
    return r;
  }

  kiln::v1::GetCacheStatsResponse Stats(KilnClient& c) {
    auto s = c.GetCacheStats();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : kiln::v1::GetCacheStatsResponse();
  }

  // Waits (up to 10 s) until the replica has written `n` entries to Redis.
  bool AwaitRemoteWrites(KilnClient& c, int64_t n) {
    for (int i = 0; i < 200; ++i) {
      if (Stats(c).remote().writes() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The model's output for examples/x.npy against NumPy's (mlp_expected.npy).
  void ExpectReferenceOutput(KilnClient& c, const std::string& model) {
    auto r = c.Infer(model, {{"x", x_}}, false);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs.size(), 1u);
    const std::string& got = r->outputs[0].second.data;
    ASSERT_EQ(got.size(), expected_.data.size());
    std::vector<float> a(got.size() / 4), b(a.size());
    std::memcpy(a.data(), got.data(), got.size());
    std::memcpy(b.data(), expected_.data.data(), got.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  static int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
    return n;
  }

  RedisServer redis_;
  std::string dir_;
  kiln::v1::Graph graph_;
  client::NpyArray x_, expected_;
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
  ASSERT_TRUE(ca->Compile(Mlp("mlp")).ok());
  ASSERT_TRUE(AwaitRemoteWrites(*ca, 1));
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
