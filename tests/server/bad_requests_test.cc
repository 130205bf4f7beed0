// Issue 20's table of statuses: what a careless or hostile client sends, the
// status it gets, and the server still serving afterwards. Through the
// generated stubs, or raw bytes where the stubs could not send them.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::AddNode;
using ::kiln::testing::EndToEndTest;
using ::kiln::testing::MlpGraph;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BadRequestsTest : public EndToEndTest {
 protected:
  // Calls `method` with `bytes` as the request, whatever they are.
  grpc::Status CallWithBytes(const std::string& method, const std::string& bytes) {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                       grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext ctx;
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        stub.PrepareUnaryCall(&ctx, method, request, &cq);
    call->StartCall();
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  kiln::v1::CompileModelResponse CompileOk(const kiln::v1::Graph& graph, const std::string& name,
                                          bool replace = false) {
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = graph;
    request.set_model_name(name);
    request.set_replace(replace);
    kiln::v1::CompileModelResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = compiler_->CompileModel(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
};

// Bytes that are no message of the method's type: the client's fault, so
// INVALID_ARGUMENT saying so (it was INTERNAL with an empty message).
TEST_F(BadRequestsTest, UndecodableRequestBytesAreInvalidArgument) {
  const std::string garbage("\xff\xff\xff\xff\x0f\x0a\x80", 7);
  for (const char* method : {"/inference.GRPCInferenceService/ModelInfer",
                             "/inference.GRPCInferenceService/ModelMetadata",
                             "/kiln.v1.Compiler/CompileModel"}) {
    SCOPED_TRACE(method);
    grpc::Status s = CallWithBytes(method, garbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("request"));
  }
  ExpectServerStillLive();
}

TEST_F(BadRequestsTest, RawAndTypedContentsOnOneRequestAreInvalidArgument) {
  ASSERT_TRUE(Compile(MlpGraph(), "mlp_mixed").ok());
  inference::ModelInferRequest r = MlpRequest("mlp_mixed");
  for (int i = 0; i < 64; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  grpc::Status s = Infer(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("raw_input_contents"));
  ExpectServerStillLive();
}

// A limit of the server's: RESOURCE_EXHAUSTED naming it and its flag.
TEST_F(BadRequestsTest, AGraphPastTheNodeLimitIsResourceExhaustedNamingTheFlag) {
  kiln::v1::Graph g;
  g.set_name("too_many_nodes");
  kiln::v1::ValueInfo* x = g.add_inputs();
  x->set_name("x");
  x->set_dtype(kiln::v1::FLOAT32);
  x->add_dims(4);
  std::string last = "x";
  for (int i = 0; i < 200000; ++i) {
    const std::string name = "r" + std::to_string(i);
    AddNode(g, name, "relu", {last});
    last = name;
  }
  g.add_outputs(last);
  grpc::Status s = Compile(g, "too_many_nodes");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("200000"));
  EXPECT_THAT(s.error_message(), HasSubstr("--max-graph-nodes"));
  ExpectServerStillLive();
}

// A name whose compile failed: FAILED_PRECONDITION with the compile's own
// diagnostic (it was NOT_FOUND, and the diagnostic was lost) until a
// compile of it succeeds.
TEST_F(BadRequestsTest, AModelWhoseCompileFailedIsFailedPreconditionWithTheDiagnostic) {
  kiln::v1::Graph broken = MlpGraph();
  broken.mutable_nodes(1)->set_op("frobnicate");
  EXPECT_EQ(Compile(broken, "mlp_broken").error_code(), grpc::StatusCode::UNIMPLEMENTED);

  grpc::Status infer = Infer(MlpRequest("mlp_broken"));
  EXPECT_EQ(infer.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << infer.error_message();
  EXPECT_THAT(infer.error_message(), HasSubstr("frobnicate"));
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("mlp_broken");
  inference::ModelMetadataResponse metadata;
  EXPECT_EQ(inference_->ModelMetadata(&ctx, metadata_request, &metadata).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Infer(MlpRequest("never_sent")).error_code(), grpc::StatusCode::NOT_FOUND);

  ASSERT_TRUE(Compile(MlpGraph(), "mlp_broken").ok());
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(MlpRequest("mlp_broken"), &response).ok());
  ExpectOutputMatchesNumPy(response, 0);
}

// A name serves one model until a compile asks to replace it: another
// model under a served name is ALREADY_EXISTS, the same one again is a
// recompile, and a replacement is the next version. model_version selects.
TEST_F(BadRequestsTest, AnotherModelUnderAServedNameNeedsReplaceAndBecomesTheNextVersion) {
  EXPECT_EQ(CompileOk(MlpGraph(), "mlp_versions").version(), 1);
  kiln::v1::Graph other = MlpGraph();
  other.mutable_nodes(3)->set_op("sigmoid");  // relu2 becomes a sigmoid

  kiln::v1::CompileModelResponse unused;
  grpc::Status refused = Compile(other, "mlp_versions", &unused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("replace"));
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(MlpRequest("mlp_versions"), &response).ok());
  EXPECT_EQ(response.model_version(), "1");
  ExpectOutputMatchesNumPy(response, 0);  // still the first model

  EXPECT_EQ(CompileOk(MlpGraph(), "mlp_versions").version(), 1);  // the same again
  EXPECT_EQ(CompileOk(other, "mlp_versions", /*replace=*/true).version(), 2);

  inference::ModelInferRequest old_version = MlpRequest("mlp_versions");
  old_version.set_model_version("1");
  grpc::Status gone = Infer(old_version);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND) << gone.error_message();
  EXPECT_THAT(gone.error_message(), HasSubstr("version 2"));

  inference::ModelInferRequest current = MlpRequest("mlp_versions");
  current.set_model_version("2");
  ASSERT_TRUE(Infer(current, &response).ok());
  EXPECT_EQ(response.model_version(), "2");
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("mlp_versions");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(inference_->ModelMetadata(&ctx, metadata_request, &metadata).ok());
  EXPECT_THAT(metadata.versions(), ElementsAre("2"));
}

// Run-time indices out of range: INVALID_ARGUMENT naming the node, never a
// read outside the tensor; in-range calls before and after are right.
TEST_F(BadRequestsTest, GatherIndicesOutOfRangeAreInvalidArgument) {
  kiln::v1::Graph g;
  g.set_name("lookup");
  kiln::v1::ValueInfo* i = g.add_inputs();
  i->set_name("i");
  i->set_dtype(kiln::v1::INT64);
  i->add_dims(2);
  kiln::v1::Tensor* table = g.add_constants();
  table->set_name("table");
  table->set_dtype(kiln::v1::FLOAT32);
  table->add_dims(3);
  table->add_dims(2);
  const float values[] = {0, 1, 10, 11, 20, 21};
  table->set_raw_data(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  (*AddNode(g, "rows", "gather", {"table", "i"})->mutable_attributes())["axis"].set_i(0);
  g.add_outputs("rows");
  ASSERT_TRUE(Compile(g, "lookup").ok());
  auto request = [](std::vector<int64_t> indices) {
    inference::ModelInferRequest r;
    r.set_model_name("lookup");
    auto* in = AddInput(r, "i", "INT64", {2});
    for (int64_t v : indices) in->mutable_contents()->add_int64_contents(v);
    return r;
  };
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(request({2, 0}), &response).ok());
  for (int64_t bad : {int64_t{3}, int64_t{-4}, int64_t{1} << 40}) {
    grpc::Status s = Infer(request({0, bad}));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("outside [-3, 3)"));
    EXPECT_THAT(s.error_message(), HasSubstr("'rows'"));
  }
  ASSERT_TRUE(Infer(request({-1, 1}), &response).ok());
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_THAT(kiln::testing::Floats(response.raw_output_contents(0)), ElementsAre(20, 21, 10, 11));
}

}  // namespace
}  // namespace kiln
