// A call that runs long neither wedges the server nor holds SIGTERM: a
// benchmark stops at its deadline, and a stop signal ends the process within
// --shutdown-grace-s and a little more (issue 20: SIGTERM waited forever).
#include <chrono>
#include <string>
#include <thread>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kiln_service.grpc.pb.h"
#include "tests/server/server_process.h"

namespace kiln {
namespace {

using testing::ServerProcess;

class ShutdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_shutdown_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Compiles the MLP on `server` and returns the key of its first kernel.
  std::string CompileAndPickAKernel(const ServerProcess& server) {
    auto client = client::KilnClient::Create("127.0.0.1:" + std::to_string(server.port()));
    EXPECT_TRUE(client.ok());
    auto graph = client::LoadGraphFile("examples/mlp.pbtxt");
    EXPECT_TRUE(graph.ok()) << graph.status();
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = *graph;
    auto compiled = (*client)->Compile(request);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled.ok() ? compiled->report().kernels(0).key() : "";
  }

  // A benchmark asking for about 100 s, with `deadline_s` (0: none).
  grpc::Status LongBenchmark(int port, const std::string& key, double deadline_s) {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    auto stub = kiln::v1::Compiler::NewStub(channel);
    kiln::v1::BenchmarkKernelRequest request;
    request.set_key(key);
    request.set_repeat(100);
    request.set_min_repeat_ms(1000);
    grpc::ClientContext ctx;
    if (deadline_s > 0) {
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int>(deadline_s * 1000)));
    }
    kiln::v1::BenchmarkKernelResponse response;
    return stub->BenchmarkKernel(&ctx, request, &response);
  }

  std::string dir_;
};

TEST_F(ShutdownTest, ALongBenchmarkStopsAtItsDeadline) {
  ServerProcess server(dir_);
  ASSERT_GT(server.port(), 0);
  const std::string key = CompileAndPickAKernel(server);
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = LongBenchmark(server.port(), key, 1.0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // The server is free again soon after: a second short call is answered.
  auto client = client::KilnClient::Create("127.0.0.1:" + std::to_string(server.port()));
  ASSERT_TRUE(client.ok());
  kiln::v1::BenchmarkKernelRequest quick;
  quick.set_key(key);
  EXPECT_TRUE((*client)->BenchmarkKernel(quick).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(ShutdownTest, SigtermEndsTheServerWithinTheGraceDespiteALongCall) {
  ServerProcess server(dir_, {"--shutdown-grace-s=1"});
  ASSERT_GT(server.port(), 0);
  const std::string key = CompileAndPickAKernel(server);
  grpc::Status benchmark;
  std::thread caller([&] { benchmark = LongBenchmark(server.port(), key, 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(server.StopWith(SIGTERM, std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  caller.join();
  EXPECT_FALSE(benchmark.ok());
}

}  // namespace
}  // namespace kiln
