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
#include "onnx/onnx_pb.h"
#include "tests/server/external_data_model.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::ExternalDataModel;
using ::kiln::testing::ExternalDataWeights;
using ::kiln::testing::Fixture;
using ::kiln::testing::Floats;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& bytes) {
  std::system(("mkdir -p " + path.substr(0, path.rfind('/'))).c_str());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A kiln-server on a free loopback port serving `repo`.
absl::StatusOr<std::unique_ptr<server::KilnServer>> StartOnRepository(const std::string& repo) {
  server::ServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.model_repository = repo;
  return server::StartKilnServer(options);
}

std::unique_ptr<inference::GRPCInferenceService::Stub> InferenceStub(server::KilnServer& server) {
  return inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials()));
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

  auto server = StartOnRepository(repo);
  ASSERT_TRUE(server.ok()) << server.status();
  auto inference = InferenceStub(**server);

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

// External data is read from the model's own directory, and from nowhere
// else: not through "..", an absolute path or a symlink out.
TEST(ModelRepositoryTest, ExternalDataLoadsFromInsideTheModelsDirectoryOnly) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/kiln_repo_external";
  const std::string repo = root + "/repo";
  std::system(("rm -rf " + root).c_str());
  const std::string weights = ExternalDataWeights();
  Write(repo + "/affine/1/model.onnx", ExternalDataModel("weights.bin"));
  Write(repo + "/affine/1/weights.bin", weights);
  Write(root + "/outside/weights.bin", weights);
  Write(repo + "/climbs/1/model.onnx", ExternalDataModel("../../../outside/weights.bin"));
  Write(repo + "/absolute/1/model.onnx", ExternalDataModel(root + "/outside/weights.bin"));
  Write(repo + "/linked/1/model.onnx", ExternalDataModel("weights.bin"));
  ASSERT_EQ(::symlink((root + "/outside/weights.bin").c_str(),
                      (repo + "/linked/1/weights.bin").c_str()),
            0);
  Write(repo + "/short/1/model.onnx", ExternalDataModel("weights.bin"));
  Write(repo + "/short/1/weights.bin", weights.substr(0, 28));  // b's last 4 bytes missing

  auto server = StartOnRepository(repo);
  ASSERT_TRUE(server.ok()) << server.status();
  auto inference = InferenceStub(**server);
  auto infer = [&](const std::string& name, inference::ModelInferResponse* response) {
    const std::vector<float> x = {1, 0, -1, 2, 1, 0};
    inference::ModelInferRequest request;
    request.set_model_name(name);
    AddInput(request, "x", "FP32", {2, 3});
    request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), 24));
    grpc::ClientContext ctx;
    return inference->ModelInfer(&ctx, request, response);
  };
  inference::ModelInferResponse response;
  grpc::Status s = infer("affine", &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // [1 0 -1] @ [[1 2] [3 4] [5 6]] = [-4 -4]; [2 1 0] @ ... = [5 8]; + [0.5 -1].
  EXPECT_THAT(Floats(response.raw_output_contents(0)),
              ::testing::ElementsAre(-3.5f, -5.0f, 5.5f, 7.0f));
  for (const auto& [name, reason] :
       {std::pair<std::string, std::string>{"climbs", "climbs out"},
        {"absolute", "relative path"},
        {"linked", "symlinks out are refused"},
        {"short", "does not hold the tensor's 8 bytes"}}) {
    SCOPED_TRACE(name);
    inference::ModelInferResponse refused;
    grpc::Status st = infer(name, &refused);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(reason));
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace kiln
