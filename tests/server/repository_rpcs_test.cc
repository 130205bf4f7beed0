// Triton's model repository extension against a kiln-server process, called
// as Triton's Python client calls it (get_model_repository_index,
// load_model, unload_model): states through a load/unload cycle, a model
// whose compile fails, names the repository does not hold.
#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::ExpectMlpRows;
using ::kiln::testing::MlpRowsRequest;
using ::kiln::testing::ServerProcess;
using ::testing::HasSubstr;

using Index = inference::RepositoryIndexResponse::ModelIndex;

class RepositoryRpcsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string root = testing::TestTmpDir("repository_rpcs_test");
    const std::string repo = testing::WriteRepository(root, {"cycle_mlp"});
    // An older version beside the served one: the index shows the highest.
    testing::WriteFile(repo + "/cycle_mlp/3/model.onnx",
                       testing::ReadFile(repo + "/cycle_mlp/1/model.onnx"));
    server_ = new ServerProcess(
        root + "/cache",
        {"--model-repository=" + repo, "--model-control-mode=explicit", "--load-model=*"});
    ASSERT_GT(server_->port(), 0);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    inference_ = inference::GRPCInferenceService::NewStub(ChannelTo(*server_));
  }

  std::map<std::string, Index> RepositoryIndex(bool ready = false) {
    inference::RepositoryIndexRequest request;
    request.set_ready(ready);
    inference::RepositoryIndexResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = inference_->RepositoryIndex(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<std::string, Index> out;
    for (const Index& m : response.models()) out[m.name()] = m;
    return out;
  }
  grpc::Status Load(const std::string& name) {
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(name);
    inference::RepositoryModelLoadResponse response;
    grpc::ClientContext ctx;
    return inference_->RepositoryModelLoad(&ctx, request, &response);
  }
  grpc::Status Unload(const std::string& name) {
    // As unload_model sends it.
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name(name);
    (*request.mutable_parameters())["unload_dependents"].set_bool_param(false);
    inference::RepositoryModelUnloadResponse response;
    grpc::ClientContext ctx;
    return inference_->RepositoryModelUnload(&ctx, request, &response);
  }
  bool Ready(const std::string& name) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    inference::ModelReadyResponse response;
    grpc::ClientContext ctx;
    EXPECT_TRUE(inference_->ModelReady(&ctx, request, &response).ok());
    return response.ready();
  }
  grpc::Status Infer(const std::string& name) {
    inference::ModelInferResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = inference_->ModelInfer(&ctx, MlpRowsRequest(name, 2, 3), &response);
    if (s.ok()) ExpectMlpRows(response, 2, 3);
    return s;
  }

  static ServerProcess* server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
};

ServerProcess* RepositoryRpcsTest::server_ = nullptr;

TEST_F(RepositoryRpcsTest, IndexShowsReadyModelsAndTheCompilersReasonForAFailedOne) {
  std::map<std::string, Index> index = RepositoryIndex();
  ASSERT_TRUE(index.count("mlp") && index.count("cycle_mlp") && index.count("broken"));
  EXPECT_EQ(index["mlp"].state(), "READY");
  EXPECT_EQ(index["mlp"].version(), "1");
  EXPECT_EQ(index["cycle_mlp"].state(), "READY");
  EXPECT_EQ(index["cycle_mlp"].version(), "3");
  EXPECT_EQ(index["broken"].state(), "UNAVAILABLE");
  // The importer's diagnostic: the operator and the node it is on.
  EXPECT_THAT(index["broken"].reason(), HasSubstr("RandomUniformLike"));
  EXPECT_THAT(index["broken"].reason(), HasSubstr("the_random"));

  std::map<std::string, Index> ready = RepositoryIndex(/*ready=*/true);
  EXPECT_TRUE(ready.count("mlp") && ready.count("cycle_mlp"));
  EXPECT_FALSE(ready.count("broken"));

  // Loading it again fails again, with the same reason, and says so.
  grpc::Status s = Load("broken");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("RandomUniformLike"));
  EXPECT_EQ(RepositoryIndex()["broken"].state(), "UNAVAILABLE");
  EXPECT_FALSE(Ready("broken"));
}

TEST_F(RepositoryRpcsTest, UnloadAndLoadAgain) {
  ASSERT_TRUE(Ready("cycle_mlp"));
  ASSERT_TRUE(Infer("cycle_mlp").ok());

  grpc::Status s = Unload("cycle_mlp");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(Ready("cycle_mlp"));
  EXPECT_EQ(Infer("cycle_mlp").error_code(), grpc::StatusCode::NOT_FOUND);
  Index unloaded = RepositoryIndex()["cycle_mlp"];
  EXPECT_EQ(unloaded.state(), "UNAVAILABLE");
  EXPECT_EQ(unloaded.reason(), "unloaded");
  EXPECT_EQ(unloaded.version(), "3");
  EXPECT_FALSE(RepositoryIndex(/*ready=*/true).count("cycle_mlp"));
  // Unloading what is not loaded is done already.
  EXPECT_TRUE(Unload("cycle_mlp").ok());

  s = Load("cycle_mlp");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Ready("cycle_mlp"));
  Index loaded = RepositoryIndex()["cycle_mlp"];
  EXPECT_EQ(loaded.state(), "READY");
  EXPECT_EQ(loaded.reason(), "");
  EXPECT_EQ(loaded.version(), "3");
  EXPECT_TRUE(Infer("cycle_mlp").ok());
  // Loading a loaded model loads it again (Triton's reload); it stays ready.
  EXPECT_TRUE(Load("cycle_mlp").ok());
  EXPECT_TRUE(Infer("cycle_mlp").ok());
}

TEST_F(RepositoryRpcsTest, NamesTheRepositoryDoesNotHold) {
  grpc::Status s = Load("no_such_model");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("no_such_model"));
  EXPECT_EQ(Unload("no_such_model").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(RepositoryIndex().count("no_such_model"));
  // A parameter Kiln cannot honour (Triton's config override) is refused.
  inference::RepositoryModelLoadRequest request;
  request.set_model_name("mlp");
  (*request.mutable_parameters())["config"].set_string_param("{}");
  inference::RepositoryModelLoadResponse response;
  grpc::ClientContext ctx;
  EXPECT_EQ(inference_->RepositoryModelLoad(&ctx, request, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

// Without --model-repository there is nothing to load from; the index still
// lists what the server serves.
TEST(RepositoryRpcsWithoutRepositoryTest, LoadIsFailedPreconditionIndexListsCompiledModels) {
  const std::string root = testing::TestTmpDir("repository_rpcs_none");
  ServerProcess server(root + "/cache");
  ASSERT_GT(server.port(), 0);
  auto channel = ChannelTo(server);
  auto compiler = kiln::v1::Compiler::NewStub(channel);
  kiln::v1::CompileModelRequest compile;
  *compile.mutable_graph() = testing::MlpGraph();
  {
    grpc::ClientContext ctx;
    kiln::v1::CompileModelResponse compiled;
    ASSERT_TRUE(compiler->CompileModel(&ctx, compile, &compiled).ok());
  }
  auto inference = inference::GRPCInferenceService::NewStub(channel);
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("mlp");
  inference::RepositoryModelLoadResponse loaded;
  grpc::ClientContext ctx;
  grpc::Status s = inference->RepositoryModelLoad(&ctx, load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--model-repository"));
  inference::RepositoryIndexResponse index;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(inference->RepositoryIndex(&ctx2, inference::RepositoryIndexRequest(), &index).ok());
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).name(), "mlp");
  EXPECT_EQ(index.models(0).state(), "READY");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// While a load compiles, the index says LOADING. The kernels are not kept
// once unloaded (no disk cache, no memory kept beyond loaded models), so the
// second load compiles for real while the index is polled.
TEST(RepositoryLoadingTest, IndexSaysLoadingWhileTheLoadCompiles) {
  const std::string root = testing::TestTmpDir("repository_loading_test");
  const std::string repo = root + "/repo";
  testing::WriteFile(repo + "/cnn/1/model.onnx",
                     testing::ReadFile(std::string(testing::kOnnxData) + "small_cnn.onnx"));
  ServerProcess server("none", {"--model-repository=" + repo, "--model-control-mode=explicit",
                                "--load-model=*", "--cache-memory-max-bytes=0"});
  ASSERT_GT(server.port(), 0);
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext ctx;
    return ((*inference).*method)(&ctx, request, response);
  };
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("cnn");
  inference::RepositoryModelUnloadResponse unloaded;
  ASSERT_TRUE(
      call(&inference::GRPCInferenceService::Stub::RepositoryModelUnload, unload, &unloaded).ok());

  std::atomic<bool> load_done{false};
  grpc::Status load_status;
  std::thread loader([&] {
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("cnn");
    inference::RepositoryModelLoadResponse loaded;
    load_status = call(&inference::GRPCInferenceService::Stub::RepositoryModelLoad, load, &loaded);
    load_done = true;
  });
  std::vector<std::string> sequence;  // the states seen, each change once
  while (!load_done) {
    inference::RepositoryIndexResponse index;
    if (!call(&inference::GRPCInferenceService::Stub::RepositoryIndex,
              inference::RepositoryIndexRequest(), &index)
             .ok()) {
      continue;
    }
    for (const Index& m : index.models()) {
      if (m.name() != "cnn") continue;
      if (sequence.empty() || sequence.back() != m.state()) sequence.push_back(m.state());
    }
  }
  loader.join();
  ASSERT_TRUE(load_status.ok()) << load_status.error_message();
  EXPECT_THAT(sequence, ::testing::Contains("LOADING")) << ::testing::PrintToString(sequence);
  // Nothing after LOADING but READY.
  auto loading = std::find(sequence.begin(), sequence.end(), "LOADING");
  for (auto it = loading; it != sequence.end(); ++it) {
    EXPECT_TRUE(*it == "LOADING" || *it == "READY") << *it;
  }
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::RepositoryIndex,
                   inference::RepositoryIndexRequest(), &index)
                  .ok());
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).state(), "READY");
}

}  // namespace
}  // namespace kiln
