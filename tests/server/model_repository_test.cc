// --model-repository: Triton's DIR/NAME/VERSION/model.* layout, loaded at
// start; the highest version served; broken models remembered with their
// diagnostic; nothing read from outside the directory.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::Fixture;
using ::kiln::testing::Floats;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& bytes) {
  std::system(("mkdir -p " + path.substr(0, path.rfind('/'))).c_str());
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(ModelRepositoryTest, LoadsTheHighestVersionOfEachModelAndNothingFromOutside) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/kiln_repo_test";
  const std::string repo = root + "/repo";
  std::system(("rm -rf " + root).c_str());
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(MlpGraph(), &text));
  Write(repo + "/mlp/1/model.pbtxt", "this is no graph");  // an older, broken version
  Write(repo + "/mlp/3/model.pbtxt", text);
  Write(repo + "/mlp/latest/model.pbtxt", "not a version");
  Write(repo + "/mlp_binary/2/model.pb", MlpGraph().SerializeAsString());
  Write(repo + "/broken/1/model.onnx", "garbage bytes");
  Write(root + "/outside/secret.onnx", MlpGraph().SerializeAsString());
  std::system(("mkdir -p " + repo + "/escape/1").c_str());
  ASSERT_EQ(::symlink((root + "/outside/secret.onnx").c_str(),
                      (repo + "/escape/1/model.onnx").c_str()),
            0);

  server::ServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.model_repository = repo;
  auto server = server::StartKilnServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto inference = inference::GRPCInferenceService::NewStub(channel);

  const NpyFloat32 x = Fixture("x"), y = Fixture("y");
  for (const auto& [name, version] : {std::pair<std::string, std::string>{"mlp", "3"},
                                      {"mlp_binary", "2"}}) {
    SCOPED_TRACE(name);
    inference::ModelInferRequest request;
    request.set_model_name(name);
    AddInput(request, "x", "FP32", x.shape);
    request.add_raw_input_contents(x.bytes());
    inference::ModelInferResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = inference->ModelInfer(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_version(), version);
    std::vector<float> got = Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), y.values.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5);
  }
  for (const char* name : {"broken", "escape"}) {
    SCOPED_TRACE(name);
    inference::ModelInferRequest request;
    request.set_model_name(name);
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = inference->ModelInfer(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(),
                HasSubstr(std::string(name) == "broken" ? "ONNX" : "not inside the repository"));
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace kiln
