// The server tests' fixture: kiln-server in-process on a free localhost
// port, driven through the generated gRPC stubs only (no client library),
// and the MLP built as a kiln.v1.Graph from NumPy fixtures
// (tests/server/data/make_mlp_fixture.py). Header-only so that each test
// binary's KILN_E2E_INFER_SPIN_US (sync threads or spin loop) applies.
#ifndef KILN_TESTS_SERVER_SERVER_FIXTURE_H_
#define KILN_TESTS_SERVER_SERVER_FIXTURE_H_

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"
#include "server/kiln_server.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln::testing {

inline constexpr char kData[] = "tests/server/data/";
inline constexpr char kOnnxData[] = "tests/compiler/frontend/data/";

inline NpyFloat32 Fixture(const std::string& name) {
  absl::StatusOr<NpyFloat32> a = ReadNpyFloat32(kData + name + ".npy");
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : NpyFloat32{};
}

inline void AddConstant(kiln::v1::Graph& g, const std::string& name) {
  const NpyFloat32 a = Fixture(name);
  kiln::v1::Tensor* t = g.add_constants();
  t->set_name(name);
  t->set_dtype(kiln::v1::FLOAT32);
  for (int64_t d : a.shape) t->add_dims(d);
  t->set_raw_data(a.bytes());
}

inline kiln::v1::Node* AddNode(kiln::v1::Graph& g, const std::string& name, const std::string& op,
                        std::vector<std::string> inputs) {
  kiln::v1::Node* n = g.add_nodes();
  n->set_name(name);
  n->set_op(op);
  for (const std::string& in : inputs) n->add_inputs(in);
  return n;
}

// softmax(relu(relu(x @ w1.T + b1) @ w2.T + b2) @ w3.T + b3), x float32[4,16].
inline kiln::v1::Graph MlpGraph() {
  kiln::v1::Graph g;
  g.set_name("mlp");
  kiln::v1::ValueInfo* x = g.add_inputs();
  x->set_name("x");
  x->set_dtype(kiln::v1::FLOAT32);
  x->add_dims(4);
  x->add_dims(16);
  for (const char* c : {"w1", "b1", "w2", "b2", "w3", "b3"}) AddConstant(g, c);
  AddNode(g, "fc1", "dense", {"x", "w1", "b1"});
  AddNode(g, "relu1", "relu", {"fc1"});
  AddNode(g, "fc2", "dense", {"relu1", "w2", "b2"});
  AddNode(g, "relu2", "relu", {"fc2"});
  AddNode(g, "fc3", "dense", {"relu2", "w3", "b3"});
  kiln::v1::Node* softmax = AddNode(g, "probs", "softmax", {"fc3"});
  (*softmax->mutable_attributes())["axis"].set_i(-1);
  g.add_outputs("probs");
  return g;
}

// An FP32 input of ModelInferRequest with its shape (the bytes go elsewhere).
inline inference::ModelInferRequest::InferInputTensor* AddInput(inference::ModelInferRequest& r,
                                                         const std::string& name,
                                                         const std::string& datatype,
                                                         const std::vector<int64_t>& shape) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

inline std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class EndToEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { StartServer(ServerOptions()); }
  // The options every suite's server starts with; a suite needing others
  // changes them and calls StartServer from its own SetUpTestSuite.
  static server::ServerOptions ServerOptions() {
    server::ServerOptions options;
    options.address = "127.0.0.1";  // not "localhost": ::1 may be another process's
    options.port = 0;
    options.threads = 2;
#ifdef KILN_E2E_INFER_SPIN_US
    // e2e_sync_test runs every test again with ModelInfer on gRPC's sync
    // threads (--infer_spin_us=0) instead of the default spin loop.
    options.infer_spin_us = KILN_E2E_INFER_SPIN_US;
#endif
    return options;
  }
  static void StartServer(const server::ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<server::KilnServer>> s = server::StartKilnServer(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    server_->Shutdown();
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                       grpc::InsecureChannelCredentials());
    inference_ = inference::GRPCInferenceService::NewStub(channel);
    compiler_ = kiln::v1::Compiler::NewStub(channel);
    x_ = Fixture("x");
  }

  grpc::Status Compile(const kiln::v1::Graph& graph, const std::string& name,
                       kiln::v1::CompileModelResponse* response) {
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = graph;
    request.set_model_name(name);
    grpc::ClientContext ctx;
    return compiler_->CompileModel(&ctx, request, response);
  }
  grpc::Status Compile(const kiln::v1::Graph& graph, const std::string& name) {
    kiln::v1::CompileModelResponse response;
    return Compile(graph, name, &response);
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    return inference_->ModelInfer(&ctx, request, response);
  }
  grpc::Status Infer(const inference::ModelInferRequest& request) {
    inference::ModelInferResponse response;
    return Infer(request, &response);
  }

  // A well-formed request for the MLP: x as raw contents.
  inference::ModelInferRequest MlpRequest(const std::string& model) {
    inference::ModelInferRequest r;
    r.set_model_name(model);
    AddInput(r, "x", "FP32", x_.shape);
    r.add_raw_input_contents(x_.bytes());
    return r;
  }

  void ExpectOutputMatchesNumPy(const inference::ModelInferResponse& response, int index) {
    const NpyFloat32 y = Fixture("y");
    ASSERT_GT(response.raw_output_contents_size(), index);
    std::vector<float> got = Floats(response.raw_output_contents(index));
    ASSERT_EQ(got.size(), y.values.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5) << "at " << i;
  }

  // CompileModel with `request`; the status.
  grpc::Status CompileRequest(const kiln::v1::CompileModelRequest& request) {
    kiln::v1::CompileModelResponse compiled;
    grpc::ClientContext ctx;
    return compiler_->CompileModel(&ctx, request, &compiled);
  }

  // A request compiling the ONNX MLP with a symbolic batch
  // (tests/compiler/frontend/data/make_onnx_fixtures.py) as `name`.
  static kiln::v1::CompileModelRequest DynamicMlpRequest(const std::string& name) {
    std::ifstream in(std::string(kOnnxData) + "mlp_dynamic.onnx", std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    kiln::v1::CompileModelRequest request;
    request.set_model_name(name);
    request.set_onnx_model(bytes.str());
    return request;
  }

  // The model's timing statistics (empty when the call fails).
  kiln::v1::ModelTiming Timing(const std::string& model) {
    kiln::v1::GetTimingStatsRequest stats_request;
    stats_request.set_model_name(model);
    kiln::v1::GetTimingStatsResponse stats;
    grpc::ClientContext ctx;
    EXPECT_TRUE(compiler_->GetTimingStats(&ctx, stats_request, &stats).ok());
    return stats.models_size() == 1 ? stats.models(0) : kiln::v1::ModelTiming();
  }

  void ExpectServerStillLive() {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse live;
    grpc::Status s = inference_->ServerLive(&ctx, inference::ServerLiveRequest(), &live);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(live.live());
  }

  inline static server::KilnServer* server_ = nullptr;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
  std::unique_ptr<kiln::v1::Compiler::Stub> compiler_;
  NpyFloat32 x_;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_SERVER_FIXTURE_H_
