// grpc.health.v1.Health and server reflection on a kiln-server process, as
// Kubernetes' gRPC probes and grpcurl use them.
#include <signal.h>

#include <chrono>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "gtest/gtest.h"
#include "tests/server/protos/health.grpc.pb.h"
#include "tests/server/protos/reflection.grpc.pb.h"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::kiln::testing::ChannelTo;
using ::kiln::testing::ServerProcess;

TEST(HealthTest, ServingWhileUpNotServingOnceShutdownStarts) {
  const std::string root = testing::TestTmpDir("health_test");
  ServerProcess server(root + "/cache", {"--shutdown-grace-s=5"});
  ASSERT_GT(server.port(), 0);
  auto health = grpc::health::v1::Health::NewStub(ChannelTo(server));
  for (const char* service : {"", "inference.GRPCInferenceService", "kiln.v1.Compiler"}) {
    SCOPED_TRACE(service);
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = health->Check(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  }
  {
    HealthCheckRequest request;
    request.set_service("no.such.Service");
    HealthCheckResponse response;
    grpc::ClientContext ctx;
    EXPECT_EQ(health->Check(&ctx, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // A probe watching the server hears NOT_SERVING when it starts to stop.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto watch = health->Watch(&ctx, HealthCheckRequest());
  HealthCheckResponse status;
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::SERVING);
  ::kill(server.pid(), SIGTERM);
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::NOT_SERVING);
  ctx.TryCancel();
  EXPECT_TRUE(server.StopWith(SIGTERM, std::chrono::seconds(15)));
}

// The reflection service lists Kiln's services and serves their files:
// what grpcurl list / describe need.
TEST(ReflectionTest, ListsTheServicesAndDescribesTheInferenceService) {
  const std::string root = testing::TestTmpDir("reflection_test");
  ServerProcess server(root + "/cache");
  ASSERT_GT(server.port(), 0);
  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(ChannelTo(server));
  grpc::ClientContext ctx;
  auto stream = reflection->ServerReflectionInfo(&ctx);

  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  grpc::reflection::v1alpha::ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  ASSERT_TRUE(listed.has_list_services_response()) << listed.DebugString();
  std::set<std::string> services;
  for (const auto& s : listed.list_services_response().service()) services.insert(s.name());
  EXPECT_THAT(services, ::testing::IsSupersetOf({"inference.GRPCInferenceService",
                                                 "kiln.v1.Compiler", "grpc.health.v1.Health",
                                                 "grpc.reflection.v1alpha.ServerReflection"}));

  grpc::reflection::v1alpha::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("inference.GRPCInferenceService");
  ASSERT_TRUE(stream->Write(describe));
  grpc::reflection::v1alpha::ServerReflectionResponse described;
  ASSERT_TRUE(stream->Read(&described));
  ASSERT_TRUE(described.has_file_descriptor_response()) << described.DebugString();
  // The service's file first, then what it imports (model_config.proto).
  bool found = false;
  std::set<std::string> packages;
  for (const std::string& bytes : described.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    packages.insert(file.package());
    for (const auto& service : file.service()) {
      if (service.name() != "GRPCInferenceService") continue;
      found = true;
      std::set<std::string> methods;
      for (const auto& m : service.method()) methods.insert(m.name());
      EXPECT_THAT(methods,
                  ::testing::IsSupersetOf({"ModelInfer", "ModelStreamInfer", "ModelConfig",
                                           "ModelStatistics", "RepositoryIndex",
                                           "RepositoryModelLoad", "RepositoryModelUnload"}));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_THAT(packages, ::testing::ElementsAre("inference"));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

// ServerMetadata names the extensions the RPCs above implement.
TEST(ServerMetadataTest, ListsTheSupportedExtensions) {
  const std::string root = testing::TestTmpDir("server_metadata_test");
  ServerProcess server(root + "/cache");
  ASSERT_GT(server.port(), 0);
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  inference::ServerMetadataResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(inference->ServerMetadata(&ctx, inference::ServerMetadataRequest(), &response).ok());
  EXPECT_EQ(response.name(), "kiln");
  EXPECT_THAT(response.extensions(), ::testing::UnorderedElementsAre(
                                         "model_repository", "model_repository(unload_dependents)",
                                         "model_configuration", "statistics", "kiln.profile"));
  inference::ServerReadyResponse ready;
  grpc::ClientContext ready_ctx;
  ASSERT_TRUE(inference->ServerReady(&ready_ctx, inference::ServerReadyRequest(), &ready).ok());
  EXPECT_TRUE(ready.ready());
}

}  // namespace
}  // namespace kiln
