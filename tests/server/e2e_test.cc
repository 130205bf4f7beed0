// End to end: kiln-server in-process on a free localhost port, driven through
// the client library over gRPC. The example MLP's outputs are checked against
// the output NumPy computed for it (examples/make_example.py).
#include <cstring>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kiln_server.h"

namespace kiln {
namespace {

using client::KilnClient;
using client::NpyArray;
using ::testing::HasSubstr;

class EndToEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options;
    options.port = 0;
    options.threads = 2;
    auto s = server::StartKilnServer(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
  }
  void SetUp() override {
    auto c = KilnClient::Create("localhost:" + std::to_string(server_->port()));
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
  }

  kiln::v1::Graph ExampleGraph() {
    auto g = client::LoadGraphFile("examples/mlp.pbtxt");
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : kiln::v1::Graph();
  }

  absl::StatusOr<kiln::v1::CompileModelResponse> Compile(const kiln::v1::Graph& graph,
                                                         const std::string& name) {
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = graph;
    request.set_model_name(name);
    return client_->Compile(request);
  }

  void ExpectServerStillAnswers() {
    auto live = client_->ServerLive();
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_TRUE(*live);
  }

  static server::KilnServer* server_;
  std::unique_ptr<KilnClient> client_;
};

server::KilnServer* EndToEndTest::server_ = nullptr;

std::vector<float> Floats(const NpyArray& a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

TEST_F(EndToEndTest, MlpMatchesNumPyAndSecondCompileIsAllCacheHits) {
  auto first = Compile(ExampleGraph(), "mlp");
  ASSERT_TRUE(first.ok()) << first.status();
  // dense+relu, dense+relu, dense, softmax (see FuseOps' tests for why).
  ASSERT_EQ(first->report().kernels_size(), 4);
  EXPECT_EQ(first->report().kernels(0).ops_size(), 2);
  EXPECT_GT(first->report().passes_size(), 3);

  auto x = client::ReadNpyFile("examples/x.npy");
  auto expected = client::ReadNpyFile("examples/mlp_expected.npy");
  ASSERT_TRUE(x.ok() && expected.ok());
  auto result = client_->Infer("mlp", {{"x", *x}}, /*profile=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_EQ(result->outputs[0].first, "probs");
  EXPECT_EQ(result->outputs[0].second.shape, expected->shape);
  std::vector<float> got = Floats(result->outputs[0].second), want = Floats(*expected);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  EXPECT_EQ(result->kernels.size(), 4u);
  EXPECT_GT(result->total_ns, 0);

  auto second = Compile(ExampleGraph(), "mlp_copy");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->report().cache_hits(), 4);
  for (const auto& k : second->report().kernels()) EXPECT_TRUE(k.cache_hit()) << k.name();
}

TEST_F(EndToEndTest, MalformedGraphIsInvalidArgument) {
  kiln::v1::Graph g = ExampleGraph();
  g.mutable_nodes(1)->set_inputs(0, "no_such_value");
  auto r = Compile(g, "broken");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no_such_value"));
  ExpectServerStillAnswers();
}

TEST_F(EndToEndTest, UnknownOpIsUnimplemented) {
  kiln::v1::Graph g = ExampleGraph();
  g.mutable_nodes(1)->set_op("gelu_of_the_future");
  auto r = Compile(g, "unknown_op");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("relu1"));
  ExpectServerStillAnswers();
}

TEST_F(EndToEndTest, ShapeMismatchIsInvalidArgumentNamingTheNode) {
  kiln::v1::Graph g = ExampleGraph();
  g.mutable_inputs(0)->set_dims(1, 15);  // x is now [4, 15]; fc1 wants K = 16
  auto r = Compile(g, "bad_shape");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("fc1"));
  ExpectServerStillAnswers();
}

TEST_F(EndToEndTest, RequestWithoutAModelIsInvalidArgument) {
  kiln::v1::CompileModelRequest request;
  request.set_model_name("empty");
  auto r = client_->Compile(request);  // no model at all
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectServerStillAnswers();
}

class InferErrorsTest : public EndToEndTest {
 protected:
  void SetUp() override {
    EndToEndTest::SetUp();
    ASSERT_TRUE(Compile(ExampleGraph(), "mlp_errors").ok());
    auto x = client::ReadNpyFile("examples/x.npy");
    ASSERT_TRUE(x.ok());
    x_ = *x;
  }
  NpyArray x_;
};

TEST_F(InferErrorsTest, UnknownModelIsNotFound) {
  auto r = client_->Infer("nobody", {{"x", x_}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, WrongInputNameIsInvalidArgument) {
  auto r = client_->Infer("mlp_errors", {{"y", x_}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'y'"));
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, WrongShapeIsInvalidArgumentSayingExpectedAndGot) {
  NpyArray bad = x_;
  bad.shape = {16, 4};
  auto r = client_->Infer("mlp_errors", {{"x", bad}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("[4,16]"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("[16,4]"));
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, WrongDatatypeIsInvalidArgument) {
  NpyArray bad = x_;
  bad.datatype = "INT64";
  auto r = client_->Infer("mlp_errors", {{"x", bad}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("FP32"));
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, WrongByteSizeIsInvalidArgument) {
  NpyArray bad = x_;
  bad.data.resize(bad.data.size() - 4);
  auto r = client_->Infer("mlp_errors", {{"x", bad}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("256 raw bytes, got 252"));
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, MissingInputIsInvalidArgument) {
  auto r = client_->Infer("mlp_errors", {}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("missing input 'x'"));
  ExpectServerStillAnswers();
}

TEST_F(InferErrorsTest, UnloadThenInferIsNotFound) {
  ASSERT_TRUE(client_->UnloadModel("mlp_errors").ok());
  EXPECT_EQ(client_->Infer("mlp_errors", {{"x", x_}}, false).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->UnloadModel("mlp_errors").code(), absl::StatusCode::kNotFound);
}

TEST_F(EndToEndTest, ServerInfoListsOpsAndTarget) {
  auto info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->ops(), ::testing::Contains("dense"));
  EXPECT_THAT(info->target_triple(), HasSubstr("x86_64"));
  EXPECT_EQ(info->llvm_version().substr(0, 3), "16.");
}

TEST_F(EndToEndTest, TimingStatsCountInferences) {
  ASSERT_TRUE(Compile(ExampleGraph(), "mlp_timing").ok());
  auto x = client::ReadNpyFile("examples/x.npy");
  ASSERT_TRUE(x.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->Infer("mlp_timing", {{"x", *x}}, false).ok());
  auto stats = client_->GetTimingStats("mlp_timing");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->models_size(), 1);
  EXPECT_EQ(stats->models(0).inference_count(), 3);
  ASSERT_EQ(stats->models(0).kernels_size(), 4);
  for (const auto& k : stats->models(0).kernels()) {
    EXPECT_EQ(k.count(), 3);
    EXPECT_LE(k.min_ns(), k.max_ns());
  }
  EXPECT_FALSE(stats->models(0).last_compile_passes().empty());
}

}  // namespace
}  // namespace kiln
