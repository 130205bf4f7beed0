// Idle connections are closed after --max-connection-idle-s, so clients
// that connect and do nothing cannot use up the server's descriptors.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/kiln_server.h"

namespace kiln {
namespace {

TEST(ConnectionLimitsTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  server::ServerOptions options;
  options.port = 0;
  options.threads = 1;
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
  // A new call reconnects.
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok());
  (*server)->Shutdown();
}

}  // namespace
}  // namespace kiln
