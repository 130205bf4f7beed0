// Idle connections are closed after --max-connection-idle-s, so clients
// that connect and do nothing cannot use up the server's descriptors; any
// connection after --max-connection-age-s, so that clients re-resolve.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/kiln_server.h"

namespace kiln {
namespace {

// With gRPC's listener, and with Kiln's (--max-connections), whose
// connections must get the same channel arguments.
class ConnectionLimitsTest : public ::testing::TestWithParam<int> {};

TEST_P(ConnectionLimitsTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  server::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.max_connections = GetParam();
  options.max_connection_idle_s = 1;
  auto server = server::StartKilnServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok());
  }
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // The server sends GOAWAY once the connection has idled a second; the
  // channel then drops to IDLE.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (channel->GetState(false) == GRPC_CHANNEL_READY &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);
  // A new call reconnects (a deadline: a hang fails here, not at the
  // test's timeout).
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok());
  (*server)->Shutdown();
}

// --max-connection-age-s: a connection busy with calls (never idle) is
// closed after about a second all the same, so that a client balancing on
// its own resolves again; its calls go on over a new connection.
TEST_P(ConnectionLimitsTest, ABusyConnectionIsClosedAfterItsMaxAge) {
  server::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.max_connections = GetParam();
  options.max_connection_idle_s = 0;
  options.max_connection_age_s = 1;
  auto server = server::StartKilnServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  bool left_ready = false;
  int calls = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!left_ready && std::chrono::steady_clock::now() < end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok()) << calls;
    ++calls;
    for (int i = 0; i < 5 && !left_ready; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      left_ready = channel->GetState(false) != GRPC_CHANNEL_READY;
    }
  }
  EXPECT_TRUE(left_ready) << "the connection stayed open through " << calls << " calls";
  EXPECT_GT(calls, 10);  // it was busy: calls every ~50 ms for about a second
  (*server)->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Listeners, ConnectionLimitsTest, ::testing::Values(0, 16));

// A channel of its own connection (channels to one target share one by
// default).
std::shared_ptr<grpc::Channel> OwnConnection(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

// Stderr sent to a file while it lives, so a test can wait for a line a
// server thread logs after the client already saw the call's end (gtest's
// CaptureStderr can be read only once, when it stops).
class StderrToFile {
 public:
  StderrToFile() : path_(::testing::TempDir() + "/stderr_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  // Whether `text` was written within `timeout`.
  bool WaitFor(const std::string& text, std::chrono::milliseconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::ifstream in(path_);
      std::stringstream all;
      all << in.rdbuf();
      if (all.str().find(text) != std::string::npos) return true;
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string path_;
  int saved_ = -1;
};

grpc::Status Live(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  inference::ServerLiveResponse live;
  return inference::GRPCInferenceService::NewStub(channel)->ServerLive(
      &ctx, inference::ServerLiveRequest(), &live);
}

// --max-connections 2: a third connection is closed at once (its call is
// UNAVAILABLE) while the first two serve; once one of them closes, a new one
// is taken.
TEST(ConnectionCapTest, OnePastTheCapIsRefusedUntilOneCloses) {
  server::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.max_connections = 2;
  auto server = server::StartKilnServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto first = OwnConnection(port), second = OwnConnection(port);
  ASSERT_TRUE(Live(first).ok());
  ASSERT_TRUE(Live(second).ok());
  {
    StderrToFile log;
    grpc::Status third = Live(OwnConnection(port));
    EXPECT_EQ(third.error_code(), grpc::StatusCode::UNAVAILABLE) << third.error_message();
    // The gate logs after closing the socket: the client may see the close first.
    EXPECT_TRUE(log.WaitFor("2 are open (--max-connections)", std::chrono::seconds(5)));
  }
  EXPECT_TRUE(Live(second).ok());  // the two still serve

  first.reset();  // its connection closes
  bool served = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!served && std::chrono::steady_clock::now() < end) {
    served = Live(OwnConnection(port)).ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
  (*server)->Shutdown();
}

TEST(ConnectionCapTest, TheCapNeedsPlaintext) {
  server::ServerOptions options;
  options.port = 0;
  options.max_connections = 2;
  options.tls_cert = "/nonexistent/cert.pem";
  options.tls_key = "/nonexistent/key.pem";
  auto server = server::StartKilnServer(options);
  EXPECT_FALSE(server.ok());
}

}  // namespace
}  // namespace kiln
