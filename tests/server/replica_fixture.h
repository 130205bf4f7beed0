// A fixture for tests of kiln-server replicas sharing one redis-server
// (started per test on a free loopback port): a scratch directory for their
// cache directories and logs, the example MLP, its input and NumPy's output
// (examples/), and the checks those tests share. Each test class adds its
// own Replica(name) with the flags it needs.
#ifndef KILN_TESTS_SERVER_REPLICA_FIXTURE_H_
#define KILN_TESTS_SERVER_REPLICA_FIXTURE_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"
#include "tests/test_util/redis_server.h"

namespace kiln::testing {

class ReplicaFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.running());
    char tmpl[] = "/tmp/kiln_replicas_testXXXXXX";
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
  void TearDown() override {
    if (std::system(("rm -rf " + dir_).c_str()) != 0) ADD_FAILURE() << "cannot remove " << dir_;
  }

  // A replica's log: <dir>/<name>.log.
  std::string LogPath(const std::string& name) { return dir_ + "/" + name + ".log"; }

  std::unique_ptr<client::KilnClient> Connect(const ServerProcess& server) {
    EXPECT_GT(server.port(), 0) << "kiln-server did not start";
    auto c = client::KilnClient::Create("127.0.0.1:" + std::to_string(server.port()));
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

  kiln::v1::GetCacheStatsResponse Stats(client::KilnClient& c) {
    auto s = c.GetCacheStats();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : kiln::v1::GetCacheStatsResponse();
  }

  // Waits (up to 10 s) until the replica has written `n` entries to Redis.
  bool AwaitRemoteWrites(client::KilnClient& c, int64_t n) {
    for (int i = 0; i < 200; ++i) {
      if (Stats(c).remote().writes() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The model's output for examples/x.npy against NumPy's (mlp_expected.npy).
  void ExpectReferenceOutput(client::KilnClient& c, const std::string& model) {
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

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_REPLICA_FIXTURE_H_
