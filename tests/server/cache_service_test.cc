// The cache and timing service over gRPC: two real kiln-server processes
// sharing one cache directory, the streaming compile, and kernels called and
// benchmarked remotely.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "tests/server/server_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using client::KilnClient;
using testing::ServerProcess;

class CacheServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_cache_service_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto g = client::LoadGraphFile("examples/mlp.pbtxt");
    ASSERT_TRUE(g.ok()) << g.status();
    *request_.mutable_graph() = *g;
    request_.set_model_name("mlp");
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<KilnClient> Connect(const ServerProcess& server) {
    EXPECT_GT(server.port(), 0) << "kiln-server did not start";
    auto c = KilnClient::Create("127.0.0.1:" + std::to_string(server.port()));
    EXPECT_TRUE(c.ok());
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::string dir_;
  kiln::v1::CompileModelRequest request_;
};

TEST_F(CacheServiceTest, SecondServerProcessOnSameDirectoryGetsDiskHits) {
  std::vector<std::string> keys;
  {
    ServerProcess first(dir_);
    auto c = Connect(first);
    ASSERT_NE(c, nullptr);
    auto r = c->Compile(request_);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& k : r->report().kernels()) {
      EXPECT_EQ(k.cache_source(), "compiled");
      keys.push_back(k.key());
    }
  }
  ServerProcess second(dir_);
  auto c = Connect(second);
  ASSERT_NE(c, nullptr);
  auto r = c->Compile(request_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->report().kernels_size(), static_cast<int>(keys.size()));
  for (int i = 0; i < r->report().kernels_size(); ++i) {
    const auto& k = r->report().kernels(i);
    EXPECT_EQ(k.cache_source(), "disk hit") << k.name();
    EXPECT_EQ(k.key(), keys[i]);
    EXPECT_GT(k.load_ms(), 0);
    EXPECT_GT(k.compile_ms(), 0);  // the original compile time, shown beside the load
  }
  auto stats = c->GetCacheStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->disk_hits(), static_cast<int64_t>(keys.size()));
  EXPECT_EQ(stats->compiles(), 0);
  EXPECT_TRUE(stats->disk_enabled());
}

TEST_F(CacheServiceTest, TwoServersCompilingAtOnceLeaveAWholeCache) {
  {
    ServerProcess a(dir_), b(dir_);
    auto ca = Connect(a), cb = Connect(b);
    ASSERT_NE(ca, nullptr);
    ASSERT_NE(cb, nullptr);
    std::thread ta([&] { EXPECT_TRUE(ca->Compile(request_).ok()); });
    std::thread tb([&] { EXPECT_TRUE(cb->Compile(request_).ok()); });
    ta.join();
    tb.join();
  }
  ServerProcess third(dir_);
  auto c = Connect(third);
  ASSERT_NE(c, nullptr);
  auto r = c->Compile(request_);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& k : r->report().kernels()) EXPECT_EQ(k.cache_source(), "disk hit");
  auto stats = c->GetCacheStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->corrupt_entries(), 0);
}

TEST_F(CacheServiceTest, StreamingCompileReportsEveryPassAndKernel) {
  ServerProcess server(dir_);
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  std::vector<kiln::v1::CompileProgress> events;
  auto r = c->CompileWithProgress(request_,
                                  [&](const kiln::v1::CompileProgress& p) { events.push_back(p); });
  ASSERT_TRUE(r.ok()) << r.status();
  int kernels = 0, passes = 0, skipped = 0;
  for (const auto& e : events) {
    kernels += e.kind() == kiln::v1::CompileProgress::KERNEL_DONE;
    passes += e.kind() == kiln::v1::CompileProgress::PASS_DONE;
    skipped += e.kind() == kiln::v1::CompileProgress::PASS_SKIPPED;
  }
  EXPECT_EQ(kernels, r->report().kernels_size());
  int reported_run = 0, reported_skipped = 0;
  for (const auto& p : r->report().passes()) (p.skipped() ? reported_skipped : reported_run)++;
  EXPECT_EQ(passes, reported_run);
  EXPECT_EQ(skipped, reported_skipped);
}

TEST_F(CacheServiceTest, CallKernelComputesAndBenchmarkIsConsistent) {
  ServerProcess server(dir_);
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Compile(request_).ok());
  auto kernels = c->ListKernels();
  ASSERT_TRUE(kernels.ok());
  const kiln::v1::KernelSummary* softmax = nullptr;
  for (const auto& k : kernels->kernels()) {
    if (k.ops_size() == 1 && k.ops(0) == "softmax") softmax = &k;
  }
  ASSERT_NE(softmax, nullptr);

  // softmax of rows [0, 1, ..., 9], checked against the formula.
  kiln::v1::CallKernelRequest call;
  call.set_key(softmax->key().substr(0, 12));  // a unique prefix is enough
  kiln::v1::TensorValue* in = call.add_inputs();
  in->set_datatype("FP32");
  in->add_shape(4);
  in->add_shape(10);
  std::vector<float> x(40);
  for (int i = 0; i < 40; ++i) x[i] = static_cast<float>(i % 10);
  in->set_raw(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  auto out = c->CallKernel(call);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->output().raw().size(), 160u);
  std::vector<float> y(40);
  std::memcpy(y.data(), out->output().raw().data(), 160);
  double sum = 0;
  for (int j = 0; j < 10; ++j) sum += std::exp(j);
  for (int i = 0; i < 40; ++i) EXPECT_NEAR(y[i], std::exp(i % 10) / sum, 1e-6);

  // Wrong argument type: INVALID_ARGUMENT naming the argument.
  in->clear_shape();
  in->add_shape(40);
  EXPECT_EQ(c->CallKernel(call).status().code(), absl::StatusCode::kInvalidArgument);
  call.set_key("0000000000000000");
  EXPECT_EQ(c->CallKernel(call).status().code(), absl::StatusCode::kNotFound);

  kiln::v1::BenchmarkKernelRequest bench;
  bench.set_key(softmax->key());
  bench.set_number(10);
  bench.set_repeat(5);
  auto b = c->BenchmarkKernel(bench);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->results_s_size(), 5);
  double lo = 1e9, hi = 0, mean = 0;
  for (double r : b->results_s()) {
    lo = std::min(lo, r);
    hi = std::max(hi, r);
    mean += r / 5;
  }
  EXPECT_DOUBLE_EQ(b->min_s(), lo);
  EXPECT_DOUBLE_EQ(b->max_s(), hi);
  EXPECT_NEAR(b->mean_s(), mean, 1e-15);
  EXPECT_LE(b->min_s(), b->median_s());
  EXPECT_LE(b->median_s(), b->max_s());
  // The roofline of softmax over [4, 10]: one FLOP per output element (the
  // default cost), 160 bytes in and 160 out; rates and fractions as defined.
  const kiln::v1::KernelRoofline& roof = b->roofline();
  EXPECT_DOUBLE_EQ(roof.flops(), 40);
  EXPECT_EQ(roof.bytes(), 320);
  EXPECT_NEAR(roof.gflops(), 40 / b->median_s() / 1e9, 1e-9 * roof.gflops());
  EXPECT_NEAR(roof.gbps(), 320 / b->median_s() / 1e9, 1e-9 * roof.gbps());
  EXPECT_GT(roof.peak_gflops(), 0);
  EXPECT_GT(roof.peak_gbps(), 0);
  EXPECT_NEAR(roof.fma_fraction(), roof.gflops() / roof.peak_gflops(), 1e-12);
  EXPECT_NEAR(roof.bandwidth_fraction(), roof.gbps() / roof.peak_gbps(), 1e-12);
  EXPECT_FALSE(roof.cpu_name().empty());
  bench.set_repeat(-1);
  EXPECT_EQ(c->BenchmarkKernel(bench).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CacheServiceTest, TimingStatsKeepFirstCallApart) {
  ServerProcess server(dir_);
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Compile(request_).ok());
  client::NpyArray x{"FP32", {4, 16}, std::string(256, '\0')};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->Infer("mlp", {{"x", x}}, false).ok());
  auto stats = c->GetTimingStats("mlp");
  ASSERT_TRUE(stats.ok());
  const auto& m = stats->models(0);
  EXPECT_EQ(m.inference().count(), 5);
  EXPECT_EQ(m.inference().first_call().count(), 1u);
  EXPECT_EQ(m.inference().steady().count(), 4u);
  for (const auto& k : m.kernels()) {
    EXPECT_EQ(k.first_call().count() + k.steady().count(), 5u);
    EXPECT_EQ(static_cast<int64_t>(k.first_call().ns() + k.steady().ns()), k.total_ns());
    EXPECT_LE(k.p50_ns(), k.p90_ns());
    EXPECT_LE(k.p90_ns(), k.p99_ns());
  }
}

}  // namespace
}  // namespace kiln
