// End to end: kiln-server in-process (server_fixture.h), driven through the
// generated gRPC stubs only; outputs checked against what NumPy computed.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"
#include "server/kiln_server.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::AddNode;
using ::kiln::testing::EndToEndTest;
using ::kiln::testing::Fixture;
using ::kiln::testing::Floats;
using ::kiln::testing::kOnnxData;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::kiln::testing::ReadNpyFloat32;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(EndToEndTest, MlpOutputMatchesNumPyWithin1e5) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp").ok());
  inference::ModelInferResponse response;
  grpc::Status s = Infer(MlpRequest("mlp"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.model_name(), "mlp");
  EXPECT_EQ(response.outputs(0).name(), "probs");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(4, 10));
  ExpectOutputMatchesNumPy(response, 0);
}

// Calls from several clients at once each get their own right answer (on the
// spin loop they queue for its one thread; on sync threads they overlap).
TEST_F(EndToEndTest, ConcurrentInferencesAllMatchNumPy) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_concurrent").ok());
  constexpr int kClients = 4, kCallsEach = 10;
  std::vector<inference::ModelInferResponse> last(kClients);
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kCallsEach && errors[c].empty(); ++i) {
        grpc::ClientContext ctx;
        grpc::Status s = inference_->ModelInfer(&ctx, MlpRequest("mlp_concurrent"), &last[c]);
        if (!s.ok()) errors[c] = s.error_message();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    ASSERT_EQ(errors[c], "") << "client " << c;
    ExpectOutputMatchesNumPy(last[c], 0);
  }
}

// FuseOps keeps dense out of the softmax's reduction group, so the MLP is four
// kernels: dense+relu, dense+relu, dense, softmax (see FuseOps' tests).
TEST_F(EndToEndTest, MlpCompilesToFourFusedKernels) {
  kiln::v1::CompileModelResponse response;
  grpc::Status s = Compile(MlpGraph(), "mlp_kernels", &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const kiln::v1::CompileReport& report = response.report();
  ASSERT_EQ(report.kernels_size(), 4);
  EXPECT_THAT(report.kernels(0).ops(), ElementsAre("dense", "relu"));
  EXPECT_THAT(report.kernels(1).ops(), ElementsAre("dense", "relu"));
  EXPECT_THAT(report.kernels(2).ops(), ElementsAre("dense"));
  EXPECT_THAT(report.kernels(3).ops(), ElementsAre("softmax"));
  EXPECT_THAT(report.kernels(0).nodes(), ElementsAre("fc1", "relu1"));
  EXPECT_THAT(report.passes(), Not(IsEmpty()));
  EXPECT_EQ(response.model_name(), "mlp_kernels");
}

TEST_F(EndToEndTest, SecondCompileUnderAnotherNameIsAllCacheHits) {
  kiln::v1::CompileModelResponse first, second;
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_first", &first).ok());
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_second", &second).ok());
  ASSERT_EQ(second.report().kernels_size(), first.report().kernels_size());
  EXPECT_EQ(second.report().cache_hits(), second.report().kernels_size());
  EXPECT_EQ(second.report().cache_misses(), 0);
  for (int k = 0; k < second.report().kernels_size(); ++k) {
    EXPECT_TRUE(second.report().kernels(k).cache_hit()) << second.report().kernels(k).name();
    EXPECT_EQ(second.report().kernels(k).key(), first.report().kernels(k).key());
  }
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(MlpRequest("mlp_second"), &response).ok());
  ExpectOutputMatchesNumPy(response, 0);
}

TEST_F(EndToEndTest, ModelNameDefaultsToTheGraphName) {
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = MlpGraph();
  kiln::v1::CompileModelResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(compiler_->CompileModel(&ctx, request, &response).ok());
  EXPECT_EQ(response.model_name(), "mlp");
}

TEST_F(EndToEndTest, Fp32ContentsAreAcceptedWithoutRawContents) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_contents").ok());
  inference::ModelInferRequest r;
  r.set_model_name("mlp_contents");
  auto* in = AddInput(r, "x", "FP32", x_.shape);
  for (float v : x_.values) in->mutable_contents()->add_fp32_contents(v);
  inference::ModelInferResponse response;
  grpc::Status s = Infer(r, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectOutputMatchesNumPy(response, 0);
}

TEST_F(EndToEndTest, ProfileParameterReportsEachKernelsTime) {
  kiln::v1::CompileModelResponse compiled;
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_profile", &compiled).ok());
  inference::ModelInferRequest r = MlpRequest("mlp_profile");
  (*r.mutable_parameters())["kiln.profile"].set_bool_param(true);
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(r, &response).ok());
  int kernel_params = 0;
  for (const auto& [name, value] : response.parameters()) {
    if (name.rfind("kiln.kernel_ns.", 0) != 0) continue;
    ++kernel_params;
    EXPECT_GE(value.int64_param(), 0) << name;
  }
  EXPECT_EQ(kernel_params, compiled.report().kernels_size());
  const std::string first = "kiln.kernel_ns.0." + compiled.report().kernels(0).name();
  EXPECT_EQ(response.parameters().count(first), 1u) << first;
  ASSERT_EQ(response.parameters().count("kiln.total_ns"), 1u);
  EXPECT_GT(response.parameters().at("kiln.total_ns").int64_param(), 0);
}

TEST_F(EndToEndTest, WithoutProfileTheResponseHasNoTimes) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_no_profile").ok());
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(MlpRequest("mlp_no_profile"), &response).ok());
  EXPECT_EQ(response.parameters().count("kiln.total_ns"), 0u);
}

TEST_F(EndToEndTest, RequestedOutputsAreHonoured) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_outputs").ok());
  inference::ModelInferRequest r = MlpRequest("mlp_outputs");
  r.add_outputs()->set_name("probs");
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(r, &response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "probs");

  r.mutable_outputs(0)->set_name("logits");
  grpc::Status s = Infer(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("'logits'"));
  // One output named many times is refused, not copied that many times.
  r.mutable_outputs(0)->set_name("probs");
  for (int i = 0; i < 250; ++i) r.add_outputs()->set_name("probs");
  s = Infer(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("'probs' is requested more than once"));
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, MetadataDescribesTheModel) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_metadata").ok());
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest request;
  request.set_name("mlp_metadata");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(inference_->ModelMetadata(&ctx, request, &metadata).ok());
  EXPECT_EQ(metadata.platform(), "kiln");
  ASSERT_EQ(metadata.inputs_size(), 1);
  EXPECT_EQ(metadata.inputs(0).name(), "x");
  EXPECT_EQ(metadata.inputs(0).datatype(), "FP32");
  EXPECT_THAT(metadata.inputs(0).shape(), ElementsAre(4, 16));
  ASSERT_EQ(metadata.outputs_size(), 1);
  EXPECT_EQ(metadata.outputs(0).name(), "probs");
  EXPECT_THAT(metadata.outputs(0).shape(), ElementsAre(4, 10));

  grpc::ClientContext ready_ctx;
  inference::ModelReadyRequest ready_request;
  ready_request.set_name("mlp_metadata");
  inference::ModelReadyResponse ready;
  ASSERT_TRUE(inference_->ModelReady(&ready_ctx, ready_request, &ready).ok());
  EXPECT_TRUE(ready.ready());

  grpc::ClientContext missing_ctx;
  request.set_name("nobody");
  EXPECT_EQ(inference_->ModelMetadata(&missing_ctx, request, &metadata).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(EndToEndTest, ServerMetadataAndInfoDescribeTheServer) {
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(inference_->ServerMetadata(&ctx, inference::ServerMetadataRequest(), &metadata).ok());
  EXPECT_EQ(metadata.name(), "kiln");
  EXPECT_FALSE(metadata.version().empty());

  grpc::ClientContext info_ctx;
  kiln::v1::GetServerInfoResponse info;
  ASSERT_TRUE(compiler_->GetServerInfo(&info_ctx, kiln::v1::GetServerInfoRequest(), &info).ok());
  EXPECT_THAT(info.ops(), Contains("dense"));
  EXPECT_THAT(info.ops(), Contains("softmax"));
  EXPECT_THAT(info.target_triple(), HasSubstr("x86_64"));
  EXPECT_FALSE(info.llvm_version().empty());
  EXPECT_EQ(info.threads(), 2);
}

TEST_F(EndToEndTest, TimingStatsCountInferencesPerKernel) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_timing").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Infer(MlpRequest("mlp_timing")).ok());
  grpc::ClientContext ctx;
  kiln::v1::GetTimingStatsRequest request;
  request.set_model_name("mlp_timing");
  kiln::v1::GetTimingStatsResponse stats;
  ASSERT_TRUE(compiler_->GetTimingStats(&ctx, request, &stats).ok());
  ASSERT_EQ(stats.models_size(), 1);
  EXPECT_EQ(stats.models(0).inference_count(), 3);
  ASSERT_EQ(stats.models(0).kernels_size(), 4);
  for (const kiln::v1::KernelTiming& k : stats.models(0).kernels()) {
    EXPECT_EQ(k.count(), 3) << k.name();
    EXPECT_LE(k.min_ns(), k.max_ns()) << k.name();
  }
  EXPECT_THAT(stats.models(0).last_compile_passes(), Not(IsEmpty()));
}

TEST_F(EndToEndTest, ListAndUnloadModels) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_unload").ok());
  grpc::ClientContext list_ctx;
  kiln::v1::ListModelsResponse list;
  ASSERT_TRUE(compiler_->ListModels(&list_ctx, kiln::v1::ListModelsRequest(), &list).ok());
  std::vector<std::string> names;
  for (const auto& m : list.models()) names.push_back(m.name());
  EXPECT_THAT(names, Contains("mlp_unload"));

  kiln::v1::UnloadModelRequest unload;
  unload.set_model_name("mlp_unload");
  kiln::v1::UnloadModelResponse unloaded;
  grpc::ClientContext ctx1, ctx2;
  ASSERT_TRUE(compiler_->UnloadModel(&ctx1, unload, &unloaded).ok());
  EXPECT_EQ(Infer(MlpRequest("mlp_unload")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(compiler_->UnloadModel(&ctx2, unload, &unloaded).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(EndToEndTest, CacheStatsCountHitsAndSavedTime) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_cache_a").ok());
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_cache_b").ok());
  grpc::ClientContext ctx;
  kiln::v1::GetCacheStatsResponse stats;
  ASSERT_TRUE(compiler_->GetCacheStats(&ctx, kiln::v1::GetCacheStatsRequest(), &stats).ok());
  EXPECT_GE(stats.hits(), 4);
  EXPECT_GT(stats.compile_ms_saved(), 0);
}

// --- Compile errors: each its own code, and the server keeps answering. ---

TEST_F(EndToEndTest, NodeReadingAnUndefinedValueIsInvalidArgument) {
  kiln::v1::Graph g = MlpGraph();
  g.mutable_nodes(1)->set_inputs(0, "no_such_value");
  grpc::Status s = Compile(g, "broken");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("no_such_value"));
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, UnknownOpIsUnimplemented) {
  kiln::v1::Graph g = MlpGraph();
  g.mutable_nodes(1)->set_op("gelu_of_the_future");
  grpc::Status s = Compile(g, "unknown_op");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("gelu_of_the_future"));
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, DenseWeightWithTheWrongKIsInvalidArgumentNamingTheNode) {
  kiln::v1::Graph g = MlpGraph();
  kiln::v1::Tensor* w1 = g.mutable_constants(0);
  ASSERT_EQ(w1->name(), "w1");
  w1->set_dims(1, 15);  // (32, 15): x has K = 16
  w1->mutable_raw_data()->resize(32 * 15 * sizeof(float));
  grpc::Status s = Compile(g, "bad_k");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("fc1"));
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, RequestWithoutAModelIsInvalidArgument) {
  kiln::v1::CompileModelRequest request;
  request.set_model_name("empty");
  kiln::v1::CompileModelResponse response;
  grpc::ClientContext ctx;
  EXPECT_EQ(compiler_->CompileModel(&ctx, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, GraphWithoutAnyNameIsInvalidArgument) {
  kiln::v1::Graph g = MlpGraph();
  g.clear_name();
  EXPECT_EQ(Compile(g, "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, GarbageOnnxBytesAreInvalidArgument) {
  kiln::v1::CompileModelRequest request;
  request.set_model_name("onnx");
  request.set_onnx_model("not really onnx");
  kiln::v1::CompileModelResponse response;
  grpc::ClientContext ctx;
  EXPECT_EQ(compiler_->CompileModel(&ctx, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ExpectServerStillLive();
}

// --- Shapes on demand. ---

// An ONNX MLP with a symbolic batch ("batch", as PyTorch's dynamic_axes
// exports it): one loaded model serves every batch, each row as NumPy
// computes it (tests/compiler/frontend/data/make_onnx_fixtures.py).
TEST_F(EndToEndTest, DynamicBatchOnnxModelServesEveryBatch) {
  const std::string dir = kOnnxData;
  {
    grpc::Status s = CompileRequest(DynamicMlpRequest("mlp_dynamic"));
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest meta_request;
    meta_request.set_name("mlp_dynamic");
    inference::ModelMetadataResponse meta;
    ASSERT_TRUE(inference_->ModelMetadata(&ctx, meta_request, &meta).ok());
    EXPECT_THAT(meta.inputs(0).shape(), ElementsAre(-1, 16));  // KServe's "any"
    EXPECT_THAT(meta.outputs(0).shape(), ElementsAre(-1, 5));
  }
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(dir + "mlp_dynamic_x.npy");
  absl::StatusOr<NpyFloat32> y = ReadNpyFloat32(dir + "mlp_dynamic_y.npy");
  ASSERT_TRUE(x.ok() && y.ok());
  for (int64_t batch : {1, 4, 7, 1}) {
    SCOPED_TRACE(batch);
    inference::ModelInferRequest r;
    r.set_model_name("mlp_dynamic");
    AddInput(r, "x", "FP32", {batch, 16});
    r.add_raw_input_contents(x->bytes().substr(0, batch * 16 * sizeof(float)));
    inference::ModelInferResponse response;
    grpc::Status s = Infer(r, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(response.outputs(0).shape(), ElementsAre(batch, 5));
    std::vector<float> got = Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), static_cast<size_t>(batch * 5));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y->values[i], 1e-5) << i;
  }
  // A fixed dim stays fixed.
  inference::ModelInferRequest wrong;
  wrong.set_model_name("mlp_dynamic");
  AddInput(wrong, "x", "FP32", {2, 15});
  wrong.add_raw_input_contents(std::string(2 * 15 * sizeof(float), '\0'));
  grpc::Status s = Infer(wrong);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("input 'x' dim 1 is 16 in the model, got 15"));
  ExpectServerStillLive();
}

// Dynamic batching on the same ONNX MLP: five clients send 1 to 3 rows
// each at once; with a preferred size of 8 and a delay no test waits for,
// the server runs them as one batch of 8, and every client gets exactly
// its own rows as NumPy computes them.
TEST_F(EndToEndTest, DynamicBatchingJoinsConcurrentRequestsAndSplitsTheirRows) {
  const std::string dir = kOnnxData;
  kiln::v1::CompileModelRequest request = DynamicMlpRequest("mlp_batched");
  kiln::v1::DynamicBatching* batching = request.mutable_options()->mutable_dynamic_batching();
  batching->set_max_batch_size(16);
  batching->add_preferred_batch_size(8);
  batching->set_max_queue_delay_microseconds(10'000'000);
  {
    grpc::Status s = CompileRequest(request);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(dir + "mlp_dynamic_x.npy");
  absl::StatusOr<NpyFloat32> y = ReadNpyFloat32(dir + "mlp_dynamic_y.npy");
  ASSERT_TRUE(x.ok() && y.ok());
  // (first row in the fixture, rows): 8 rows in all.
  const std::vector<std::pair<int64_t, int64_t>> calls = {{0, 1}, {1, 2}, {6, 1}, {3, 3}, {2, 1}};
  std::vector<grpc::Status> status(calls.size());
  std::vector<inference::ModelInferResponse> responses(calls.size());
  std::vector<std::thread> clients;
  for (size_t c = 0; c < calls.size(); ++c) {
    clients.emplace_back([&, c] {
      const auto [first, rows] = calls[c];
      inference::ModelInferRequest r;
      r.set_model_name("mlp_batched");
      AddInput(r, "x", "FP32", {rows, 16});
      r.add_raw_input_contents(x->bytes().substr(first * 16 * sizeof(float),
                                                 rows * 16 * sizeof(float)));
      grpc::ClientContext ctx;
      status[c] = inference_->ModelInfer(&ctx, r, &responses[c]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t c = 0; c < calls.size(); ++c) {
    SCOPED_TRACE(c);
    const auto [first, rows] = calls[c];
    ASSERT_TRUE(status[c].ok()) << status[c].error_message();
    EXPECT_THAT(responses[c].outputs(0).shape(), ElementsAre(rows, 5));
    std::vector<float> got = Floats(responses[c].raw_output_contents(0));
    ASSERT_EQ(got.size(), static_cast<size_t>(rows * 5));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], y->values[first * 5 + i], 1e-5) << i;
    }
  }
  const kiln::v1::ModelTiming m = Timing("mlp_batched");
  ASSERT_EQ(m.batch_stats_size(), 1);
  EXPECT_EQ(m.batch_stats(0).batch_size(), 8u);
  EXPECT_EQ(m.batch_stats(0).compute_infer().count(), 1u);
  EXPECT_EQ(m.queue().count(), 5);
  EXPECT_EQ(m.shape_compiles(), 1);  // batch 8; batch 1 was compiled at load
}

// The preferred batch sizes compile in the background at load, before any
// request: the first batches do not wait for their compiles.
TEST_F(EndToEndTest, PreferredBatchSizesCompileAtLoad) {
  kiln::v1::CompileModelRequest request = DynamicMlpRequest("mlp_preferred");
  kiln::v1::DynamicBatching* batching = request.mutable_options()->mutable_dynamic_batching();
  batching->set_max_batch_size(8);
  batching->add_preferred_batch_size(2);
  batching->add_preferred_batch_size(4);
  {
    grpc::Status s = CompileRequest(request);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::set<std::string> loaded;
  for (int i = 0; i < 300 && loaded.size() < 3; ++i) {
    loaded.clear();
    const kiln::v1::ModelTiming now = Timing("mlp_preferred");
    for (const kiln::v1::ShapeTiming& shape : now.shapes()) loaded.insert(shape.shape());
    if (loaded.size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(loaded, (std::set<std::string>{"x=[1,16]", "x=[2,16]", "x=[4,16]"}));
  EXPECT_EQ(Timing("mlp_preferred").inference().count(), 0);
}

TEST_F(EndToEndTest, DynamicBatchingNeedsABatchAxis) {
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = MlpGraph();  // x is fixed at [4, 16]
  request.set_model_name("mlp_fixed_batched");
  request.mutable_options()->mutable_dynamic_batching()->set_max_batch_size(8);
  grpc::Status s = CompileRequest(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("symbolic dim 0"));
}

// The MLP as a kiln.v1.Graph with a symbolic batch ("batch", dims -1),
// a declared range 1..4 and batch 2 compiled at load: every batch in the
// range computes what NumPy does for those rows, one outside is refused
// naming the range, and ModelMetadata reports -1 for the batch of the
// input and of the output (found by typing the graph at two batches).
TEST_F(EndToEndTest, GraphWithASymbolicBatchServesEveryBatchInItsRange) {
  kiln::v1::Graph graph = MlpGraph();
  graph.mutable_inputs(0)->set_dims(0, -1);
  graph.mutable_inputs(0)->add_dim_params("batch");
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = graph;
  request.set_model_name("mlp_symbolic");
  kiln::v1::CompileOptions* options = request.mutable_options();
  (*options->mutable_symbol_ranges())["batch"].set_min(1);
  (*options->mutable_symbol_ranges())["batch"].set_max(4);
  (*options->add_eager_shapes()->mutable_sizes())["batch"] = 2;
  {
    grpc::Status s = CompileRequest(request);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest meta_request;
    meta_request.set_name("mlp_symbolic");
    inference::ModelMetadataResponse meta;
    ASSERT_TRUE(inference_->ModelMetadata(&ctx, meta_request, &meta).ok());
    EXPECT_THAT(meta.inputs(0).shape(), ElementsAre(-1, 16));
    const NpyFloat32 y = Fixture("y");
    EXPECT_THAT(meta.outputs(0).shape(), ElementsAre(-1, y.shape[1]));
  }
  const NpyFloat32 y = Fixture("y");
  const int64_t classes = y.shape[1];
  for (int64_t batch : {2, 1, 3, 4}) {
    SCOPED_TRACE(batch);
    inference::ModelInferRequest r;
    r.set_model_name("mlp_symbolic");
    AddInput(r, "x", "FP32", {batch, 16});
    r.add_raw_input_contents(x_.bytes().substr(0, batch * 16 * sizeof(float)));
    inference::ModelInferResponse response;
    grpc::Status s = Infer(r, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(response.outputs(0).shape(), ElementsAre(batch, classes));
    std::vector<float> got = Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), static_cast<size_t>(batch * classes));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5) << i;
  }
  inference::ModelInferRequest outside;
  outside.set_model_name("mlp_symbolic");
  AddInput(outside, "x", "FP32", {5, 16});
  outside.add_raw_input_contents(std::string(5 * 16 * sizeof(float), '\0'));
  grpc::Status s = Infer(outside);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("input 'x' dim 0 ('batch') is 5, outside the model's declared range 1..4"));
  EXPECT_EQ(Timing("mlp_symbolic").shape_compiles(), 3);  // batches 1, 3 and 4 on first use
}

TEST_F(EndToEndTest, ShapeOptionsOnAFixedModelAreInvalidArgument) {
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = MlpGraph();
  request.set_model_name("mlp_fixed_ranged");
  (*request.mutable_options()->mutable_symbol_ranges())["batch"].set_max(4);
  grpc::Status s = CompileRequest(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("symbol_ranges needs inputs with symbolic dims"));
}

// The ONNX MLP with batch 8 compiled at load: the first request of batch 3
// is answered at once from the batch-8 model, padded with 5 zero rows,
// while batch 3 compiles in the background; once it is loaded, requests of
// batch 3 run on it, unpadded. Every answer is NumPy's for its rows.
TEST_F(EndToEndTest, ANewBatchSizeIsServedFromALargerOneWhileItCompiles) {
  const std::string dir = kOnnxData;
  kiln::v1::CompileModelRequest request = DynamicMlpRequest("mlp_padded");
  (*request.mutable_options()->add_eager_shapes()->mutable_sizes())["batch"] = 8;
  {
    grpc::Status s = CompileRequest(request);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(dir + "mlp_dynamic_x.npy");
  absl::StatusOr<NpyFloat32> y = ReadNpyFloat32(dir + "mlp_dynamic_y.npy");
  ASSERT_TRUE(x.ok() && y.ok());
  auto infer_batch3 = [&] {
    inference::ModelInferRequest r;
    r.set_model_name("mlp_padded");
    AddInput(r, "x", "FP32", {3, 16});
    r.add_raw_input_contents(x->bytes().substr(0, 3 * 16 * sizeof(float)));
    inference::ModelInferResponse response;
    grpc::Status s = Infer(r, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(response.outputs(0).shape(), ElementsAre(3, 5));
    std::vector<float> got = Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), 15u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y->values[i], 1e-5) << i;
  };
  auto timing = [&] { return Timing("mlp_padded"); };
  infer_batch3();
  EXPECT_EQ(timing().padded_rows(), 5);
  // The background compile ends in well under a minute; till then batch 3
  // keeps being padded.
  bool loaded = false;
  for (int i = 0; i < 600 && !loaded; ++i) {
    const kiln::v1::ModelTiming now = timing();
    for (const kiln::v1::ShapeTiming& shape : now.shapes()) {
      loaded |= shape.shape() == "x=[3,16]";
    }
    if (!loaded) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(loaded);
  const int64_t padded = timing().padded_rows();
  infer_batch3();
  EXPECT_EQ(timing().padded_rows(), padded);  // ran on batch 3's own model
  EXPECT_EQ(timing().shape_compiles(), 1);
}

// relu(Reshape(x, shape)) with `shape` a model input: nothing compiles at
// load (the report says why), each value of `shape` compiles once on first
// use (counted), and every answer is relu(x) in the shape asked for.
TEST_F(EndToEndTest, AnInputThatDecidesShapesCompilesPerValue) {
  std::ifstream in(std::string(kOnnxData) + "reshape_by_input.onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  kiln::v1::CompileModelRequest request;
  request.set_model_name("reshape_by_input");
  request.set_onnx_model(bytes.str());
  {
    kiln::v1::CompileModelResponse compiled;
    grpc::ClientContext ctx;
    grpc::Status s = compiler_->CompileModel(&ctx, request, &compiled);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(compiled.report().deferred(), HasSubstr("'shape' decides shapes"));
    EXPECT_EQ(compiled.report().kernels_size(), 0);
  }
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(std::string(kOnnxData) + "reshape_by_input_x.npy");
  ASSERT_TRUE(x.ok());
  auto infer = [&](std::vector<int64_t> shape, inference::ModelInferResponse* response) {
    inference::ModelInferRequest r;
    r.set_model_name("reshape_by_input");
    AddInput(r, "x", "FP32", {2, 3, 4});
    r.add_raw_input_contents(x->bytes());
    AddInput(r, "shape", "INT64", {static_cast<int64_t>(shape.size())});
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(shape.data()),
                                         shape.size() * sizeof(int64_t)));
    return Infer(r, response);
  };
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 6}, {6, 4}, {4, 6}, {-1, 2}}) {
    SCOPED_TRACE(shape[0]);
    inference::ModelInferResponse response;
    grpc::Status s = infer(shape, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const int64_t rows = shape[0] < 0 ? 12 : shape[0];
    EXPECT_THAT(response.outputs(0).shape(), ElementsAre(rows, shape[1]));
    std::vector<float> got = Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), x->values.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::max(0.0f, x->values[i])) << i;
  }
  EXPECT_EQ(Timing("reshape_by_input").shape_compiles(), 3);  // {4,6} twice: compiled once
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest meta_request;
    meta_request.set_name("reshape_by_input");
    inference::ModelMetadataResponse meta;
    ASSERT_TRUE(inference_->ModelMetadata(&ctx, meta_request, &meta).ok());
    ASSERT_EQ(meta.inputs_size(), 2);
    EXPECT_EQ(meta.inputs(1).name(), "shape");
    EXPECT_EQ(meta.inputs(1).datatype(), "INT64");
    EXPECT_THAT(meta.outputs(0).shape(), ElementsAre(-1, -1));
  }
  {
    grpc::ClientContext ctx;
    kiln::v1::ListModelsResponse models;
    ASSERT_TRUE(compiler_->ListModels(&ctx, kiln::v1::ListModelsRequest(), &models).ok());
    bool listed = false;
    for (const auto& m : models.models()) listed |= m.name() == "reshape_by_input";
    EXPECT_TRUE(listed);
  }
  inference::ModelInferResponse response;
  grpc::Status wrong = infer({5, 5}, &response);  // 25 elements, not 24
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, AModelWithATensorTooLargeToAllocateIsResourceExhausted) {
  kiln::v1::Graph g;
  g.set_name("huge");
  kiln::v1::ValueInfo* x = g.add_inputs();
  x->set_name("x");
  x->set_dtype(kiln::v1::FLOAT32);
  x->add_dims(int64_t{1} << 20);
  x->add_dims(int64_t{1} << 15);  // 128 GiB of float
  AddNode(g, "y", "relu", {"x"});
  g.add_outputs("y");
  grpc::Status s = Compile(g, "huge");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("4 GiB limit"));
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, ModelNamesThatCouldForgeLogsOrPathsAreInvalidArgument) {
  for (const std::string& name :
       {std::string("a\nkiln-server: forged"), std::string("nul\0x", 5), std::string("../x"),
        std::string("rtl\xe2\x80\xae"), std::string(10240, 'n'), std::string(129, 'n'),
        std::string(".hidden"), std::string("colon:name")}) {
    grpc::Status s = Compile(MlpGraph(), name);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name.size();
    EXPECT_THAT(s.error_message(), HasSubstr("model name of"));
  }
  EXPECT_TRUE(Compile(MlpGraph(), "mlp-v1.2_int8-ok").ok());
  EXPECT_TRUE(Compile(MlpGraph(), std::string(128, 'n')).ok());
  ExpectServerStillLive();
}

TEST_F(EndToEndTest, AFuseDepthPastTheLimitIsInvalidArgument) {
  for (int depth : {-1, 1025, 14000}) {
    SCOPED_TRACE(depth);
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = MlpGraph();
    request.set_model_name("mlp_deep_fuse");
    request.mutable_options()->set_max_fuse_depth(depth);
    grpc::Status s = CompileRequest(request);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("outside 1..1024"));
  }
  ExpectServerStillLive();
}

// A call whose deadline passes while its new shape compiles is not run:
// the client hears DEADLINE_EXCEEDED, the compile finishes and is kept,
// and no inference is counted on any shape of the model.
TEST_F(EndToEndTest, ACallPastItsDeadlineDoesNotRun) {
  kiln::v1::CompileModelRequest request = DynamicMlpRequest("mlp_deadline");
  request.mutable_options()->set_exact_shapes_only(true);
  {
    grpc::Status s = CompileRequest(request);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(std::string(kOnnxData) + "mlp_dynamic_x.npy");
  ASSERT_TRUE(x.ok());
  inference::ModelInferRequest r;
  r.set_model_name("mlp_deadline");
  AddInput(r, "x", "FP32", {5, 16});
  r.add_raw_input_contents(x->bytes().substr(0, 5 * 16 * sizeof(float)));
  inference::ModelInferResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
  grpc::Status s = inference_->ModelInfer(&ctx, r, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // Let the compile it started (if the call got that far) land.
  for (int i = 0; i < 50; ++i) {
    const kiln::v1::ModelTiming now = Timing("mlp_deadline");
    if (now.shape_variants_loaded() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const kiln::v1::ModelTiming timing = Timing("mlp_deadline");
  EXPECT_EQ(timing.inference().count(), 0);
  for (const kiln::v1::ShapeTiming& shape : timing.shapes()) {
    EXPECT_EQ(shape.inference().count(), 0) << shape.shape();
  }
  ExpectServerStillLive();
}

// --- Inference errors. ---

class InferErrorsTest : public EndToEndTest {
 protected:
  void SetUp() override {
    EndToEndTest::SetUp();
    ASSERT_TRUE(Compile(MlpGraph(), "mlp_errors").ok());
  }

  // Infers `request` against mlp_errors, expects INVALID_ARGUMENT, returns the message.
  std::string InvalidArgumentMessage(inference::ModelInferRequest request) {
    request.set_model_name("mlp_errors");
    grpc::Status s = Infer(request);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    ExpectServerStillLive();
    return s.error_message();
  }
};

TEST_F(InferErrorsTest, UnknownModelIsNotFound) {
  EXPECT_EQ(Infer(MlpRequest("nobody")).error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectServerStillLive();
}

TEST_F(InferErrorsTest, UnknownInputNameIsInvalidArgument) {
  inference::ModelInferRequest r = MlpRequest("mlp_errors");
  r.mutable_inputs(0)->set_name("y");
  EXPECT_THAT(InvalidArgumentMessage(r), HasSubstr("'y'"));
}

TEST_F(InferErrorsTest, MissingInputIsInvalidArgument) {
  inference::ModelInferRequest r;
  EXPECT_THAT(InvalidArgumentMessage(r), HasSubstr("missing input 'x'"));
}

TEST_F(InferErrorsTest, WrongShapeIsInvalidArgumentSayingExpectedAndGot) {
  inference::ModelInferRequest r = MlpRequest("mlp_errors");
  r.mutable_inputs(0)->set_shape(0, 16);
  r.mutable_inputs(0)->set_shape(1, 4);
  const std::string message = InvalidArgumentMessage(r);
  EXPECT_THAT(message, HasSubstr("'x'"));
  EXPECT_THAT(message, HasSubstr("[4,16]"));
  EXPECT_THAT(message, HasSubstr("[16,4]"));
}

TEST_F(InferErrorsTest, WrongDatatypeIsInvalidArgument) {
  inference::ModelInferRequest r = MlpRequest("mlp_errors");
  r.mutable_inputs(0)->set_datatype("INT64");
  const std::string message = InvalidArgumentMessage(r);
  EXPECT_THAT(message, HasSubstr("FP32"));
  EXPECT_THAT(message, HasSubstr("INT64"));
}

TEST_F(InferErrorsTest, RawByteSizeMismatchIsInvalidArgumentSayingExpectedAndGot) {
  inference::ModelInferRequest r = MlpRequest("mlp_errors");
  r.mutable_raw_input_contents(0)->resize(252);
  EXPECT_THAT(InvalidArgumentMessage(r), HasSubstr("256 raw bytes, got 252"));
}

TEST_F(InferErrorsTest, RawContentsCountUnlikeInputsCountIsInvalidArgument) {
  inference::ModelInferRequest r = MlpRequest("mlp_errors");
  r.add_raw_input_contents(x_.bytes());
  EXPECT_THAT(InvalidArgumentMessage(r), HasSubstr("raw_input_contents"));
}

TEST_F(InferErrorsTest, Fp32ContentsOfTheWrongCountIsInvalidArgument) {
  inference::ModelInferRequest r;
  auto* in = AddInput(r, "x", "FP32", x_.shape);
  in->mutable_contents()->add_fp32_contents(1.0f);
  EXPECT_THAT(InvalidArgumentMessage(r), HasSubstr("'x'"));
}

// The threads of this process whose affinity is exactly `cpu`, from
// /proc/self/task/*/status (the kernel's view, not the server's).
int ThreadsBoundTo(int cpu) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        count += line.substr(line.find_first_not_of(" \t", 18)) == std::to_string(cpu);
      }
    }
  }
  return count;
}

// --inference_cpus: ModelInfer still answers correctly, and the thread that
// ran it is left bound to the chosen CPU.
TEST_F(EndToEndTest, InferenceCpusBindTheThreadThatRunsTheModel) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one CPU: binding would change nothing";
  int cpu = CPU_SETSIZE - 1;
  while (!CPU_ISSET(cpu, &allowed)) --cpu;
  ASSERT_EQ(ThreadsBoundTo(cpu), 0);

  server::ServerOptions options;
  options.address = "localhost";
  options.port = 0;
  options.threads = 1;
  options.inference_cpus = {cpu};
  absl::StatusOr<std::unique_ptr<server::KilnServer>> bound = server::StartKilnServer(options);
  ASSERT_TRUE(bound.ok()) << bound.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*bound)->port()),
                                     grpc::InsecureChannelCredentials());
  inference_ = inference::GRPCInferenceService::NewStub(channel);
  compiler_ = kiln::v1::Compiler::NewStub(channel);
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_bound").ok());
  inference::ModelInferResponse response;
  grpc::Status s = Infer(MlpRequest("mlp_bound"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectOutputMatchesNumPy(response, 0);
  EXPECT_GE(ThreadsBoundTo(cpu), 1);
  (*bound)->Shutdown();
}

}  // namespace
}  // namespace kiln
