// Models larger than one gRPC message: UploadModel takes a header and
// chunks, checks size and SHA-256, and compiles. The server here takes
// messages of at most 1 MiB, so a 3 MiB model fails CompileModel and loads
// through UploadModel.
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::AddNode;
using ::kiln::testing::Floats;
using ::testing::HasSubstr;

// y = x @ w.T with w [768, 1024] of 0.001 * (i % 7): 3 MiB of weights.
kiln::v1::Graph BigGraph() {
  kiln::v1::Graph g;
  g.set_name("big");
  kiln::v1::ValueInfo* x = g.add_inputs();
  x->set_name("x");
  x->set_dtype(kiln::v1::FLOAT32);
  x->add_dims(1);
  x->add_dims(1024);
  kiln::v1::Tensor* w = g.add_constants();
  w->set_name("w");
  w->set_dtype(kiln::v1::FLOAT32);
  w->add_dims(768);
  w->add_dims(1024);
  std::vector<float> values(768 * 1024);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i % 7);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float)));
  AddNode(g, "y", "dense", {"x", "w"});
  g.add_outputs("y");
  return g;
}

// The MLP test graph's bytes (small: one chunk or a few).
std::string MlpSizedBytes() { return kiln::testing::MlpGraph().SerializeAsString(); }

class UploadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 1;
    options.max_message_mb = 1;
    options.max_upload_mb = 8;
    auto s = server::StartKilnServer(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    server_->Shutdown();
    delete server_;
  }
  void SetUp() override {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->port()),
                                         grpc::InsecureChannelCredentials(), args);
    compiler_ = kiln::v1::Compiler::NewStub(channel_);
  }

  // Sends `header` and then `bytes` in chunks of `chunk` bytes.
  grpc::Status Upload(const kiln::v1::UploadHeader& header, const std::string& bytes,
                      size_t chunk, kiln::v1::CompileModelResponse* response) {
    grpc::ClientContext ctx;
    auto writer = compiler_->UploadModel(&ctx, response);
    kiln::v1::ModelChunk first;
    *first.mutable_header() = header;
    bool ok = writer->Write(first);
    for (size_t at = 0; ok && at < bytes.size(); at += chunk) {
      kiln::v1::ModelChunk c;
      c.set_data(bytes.substr(at, chunk));
      ok = writer->Write(c);
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static kiln::v1::UploadHeader HeaderFor(const std::string& name, const std::string& bytes) {
    kiln::v1::UploadHeader header;
    header.mutable_request()->set_model_name(name);
    header.set_graph(true);
    header.set_total_bytes(static_cast<int64_t>(bytes.size()));
    header.set_sha256(Sha256Hex(bytes));
    return header;
  }

  inline static server::KilnServer* server_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kiln::v1::Compiler::Stub> compiler_;
};

TEST_F(UploadTest, AModelLargerThanOneMessageLoadsInChunksAndServes) {
  const std::string bytes = BigGraph().SerializeAsString();
  ASSERT_GT(bytes.size(), 3u << 20);
  {
    kiln::v1::CompileModelRequest whole;
    *whole.mutable_graph() = BigGraph();
    kiln::v1::CompileModelResponse response;
    grpc::ClientContext ctx;
    EXPECT_EQ(compiler_->CompileModel(&ctx, whole, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  kiln::v1::CompileModelResponse response;
  grpc::Status s = Upload(HeaderFor("big", bytes), bytes, 512 << 10, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_name(), "big");

  inference::ModelInferRequest request;
  request.set_model_name("big");
  AddInput(request, "x", "FP32", {1, 1024});
  std::vector<float> x(1024, 1.0f);
  request.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  auto inference = inference::GRPCInferenceService::NewStub(channel_);
  inference::ModelInferResponse out;
  grpc::ClientContext ctx;
  ASSERT_TRUE(inference->ModelInfer(&ctx, request, &out).ok());
  std::vector<float> y = Floats(out.raw_output_contents(0));
  ASSERT_EQ(y.size(), 768u);
  for (int o : {0, 1, 767}) {
    double want = 0;  // row o of w summed: w[o][i] = 0.001 * ((o * 1024 + i) % 7)
    for (int i = 0; i < 1024; ++i) want += 0.001 * ((o * 1024 + i) % 7);
    EXPECT_NEAR(y[o], want, 1e-3) << o;
  }
}

TEST_F(UploadTest, DamagedShortLongOrOversizedUploadsAreRefusedByName) {
  const std::string bytes = MlpSizedBytes();
  kiln::v1::CompileModelResponse response;

  kiln::v1::UploadHeader damaged = HeaderFor("m1", bytes);
  damaged.set_sha256(Sha256Hex("something else"));
  grpc::Status s = Upload(damaged, bytes, 1000, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("sha256"));

  s = Upload(HeaderFor("m2", bytes), bytes.substr(0, bytes.size() - 10), 1000, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("ended after"));

  s = Upload(HeaderFor("m3", bytes), bytes + "extra", 1000, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  kiln::v1::UploadHeader huge = HeaderFor("m4", bytes);
  huge.set_total_bytes(int64_t{9} << 20);
  s = Upload(huge, bytes, 1000, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max-upload-mb"));

  grpc::ClientContext ctx;
  auto writer = compiler_->UploadModel(&ctx, &response);
  kiln::v1::ModelChunk data_first;
  data_first.set_data("no header");
  writer->Write(data_first);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // And the server still serves uploads.
  s = Upload(HeaderFor("m5", bytes), bytes, 1000, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

}  // namespace
}  // namespace kiln
