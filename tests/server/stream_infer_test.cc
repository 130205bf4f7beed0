// ModelStreamInfer against a kiln-server process, as Triton's Python client's
// stream_infer uses it: requests with ids on one stream, good and bad
// interleaved; the answers come in order, each bad one as error_message, and
// the stream goes on; requests of one stream batch together.
#include <chrono>
#include <string>
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

TEST(StreamInferTest, AnswersInOrderWithErrorsInTheirPlaceAndGoesOn) {
  const std::string root = testing::TestTmpDir("stream_infer_test");
  const std::string repo = testing::WriteRepository(root, {"mlp_dynamic"});
  ServerProcess server(root + "/cache", {"--model-repository=" + repo});
  ASSERT_GT(server.port(), 0);
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(server));

  inference::ModelInferRequest wrong_dim = MlpRowsRequest("mlp_dynamic", 0, 2, "b");
  wrong_dim.mutable_inputs(0)->set_shape(1, 15);
  wrong_dim.set_raw_input_contents(0, std::string(2 * 15 * sizeof(float), '\0'));
  struct Call {
    inference::ModelInferRequest request;
    int64_t first = 0, rows = 0;  // rows 0: an error expected
    std::string error;
  };
  std::vector<Call> calls = {
      {MlpRowsRequest("mlp_dynamic", 0, 1, "a"), 0, 1, ""},
      {wrong_dim, 0, 0, "dim 1 is 16 in the model, got 15"},
      {MlpRowsRequest("mlp_dynamic", 1, 3, "c"), 1, 3, ""},
      {MlpRowsRequest("no_such_model", 0, 1, "d"), 0, 0, "no_such_model"},
      {MlpRowsRequest("mlp_dynamic", 4, 2, "e"), 4, 2, ""},
  };

  grpc::ClientContext ctx;
  auto stream = inference->ModelStreamInfer(&ctx);
  // All written before any is read: the server answers them in order anyway.
  for (const Call& c : calls) ASSERT_TRUE(stream->Write(c.request));
  ASSERT_TRUE(stream->WritesDone());
  for (const Call& c : calls) {
    SCOPED_TRACE(c.request.id());
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    EXPECT_EQ(answer.infer_response().id(), c.request.id());
    if (c.rows == 0) {
      EXPECT_THAT(answer.error_message(), HasSubstr(c.error));
      EXPECT_EQ(answer.infer_response().outputs_size(), 0);
    } else {
      EXPECT_EQ(answer.error_message(), "");
      EXPECT_EQ(answer.infer_response().model_name(), "mlp_dynamic");
      EXPECT_EQ(answer.infer_response().model_version(), "1");
      ExpectMlpRows(answer.infer_response(), c.first, c.rows);
    }
  }
  inference::ModelStreamInferResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();

  // The stream's calls count in the model's statistics like any other.
  inference::ModelStatisticsRequest request;
  request.set_name("mlp_dynamic");
  inference::ModelStatisticsResponse stats;
  grpc::ClientContext stats_ctx;
  ASSERT_TRUE(inference->ModelStatistics(&stats_ctx, request, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 3u);
  // The wrong dim's failure; the unknown model's counts for no model.
  EXPECT_EQ(stats.model_stats(0).inference_stats().fail().count(), 1u);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 6u);
}

// A client that reads each answer before sending the next (the other way
// stream_infer is used) gets the same.
TEST(StreamInferTest, OneAtATime) {
  const std::string root = testing::TestTmpDir("stream_infer_one_at_a_time");
  const std::string repo = testing::WriteRepository(root, {"mlp_dynamic"});
  ServerProcess server(root + "/cache", {"--model-repository=" + repo});
  ASSERT_GT(server.port(), 0);
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  grpc::ClientContext ctx;
  auto stream = inference->ModelStreamInfer(&ctx);
  for (int64_t first : {0, 3, 6}) {
    SCOPED_TRACE(first);
    ASSERT_TRUE(stream->Write(MlpRowsRequest("mlp_dynamic", first, 1, std::to_string(first))));
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    EXPECT_EQ(answer.error_message(), "");
    EXPECT_EQ(answer.infer_response().id(), std::to_string(first));
    ExpectMlpRows(answer.infer_response(), first, 1);
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

// Requests on one stream batch together: eight one-row requests for a model
// batching to 8 with a 10 s delay (the most it takes) run as one batch at once. Answered one
// after another, each would have waited out the delay alone.
TEST(StreamInferTest, RequestsOnOneStreamBatchTogether) {
  const std::string root = testing::TestTmpDir("stream_infer_batching");
  ServerProcess server(root + "/cache");
  ASSERT_GT(server.port(), 0);
  auto channel = ChannelTo(server);
  testing::CompileBatchingMlp(channel, "batched", 8, 8);
  auto inference = inference::GRPCInferenceService::NewStub(channel);
  const auto start = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  auto stream = inference->ModelStreamInfer(&ctx);
  // Rows 0..6 and row 0 again: 8 rows, one request each.
  for (int64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(stream->Write(MlpRowsRequest("batched", i % 7, 1, std::to_string(i))));
  }
  for (int64_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    EXPECT_EQ(answer.error_message(), "");
    EXPECT_EQ(answer.infer_response().id(), std::to_string(i));
    ExpectMlpRows(answer.infer_response(), i % 7, 1);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());

  inference::ModelStatisticsRequest request;
  request.set_name("batched");
  inference::ModelStatisticsResponse stats;
  grpc::ClientContext stats_ctx;
  ASSERT_TRUE(inference->ModelStatistics(&stats_ctx, request, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 8u);
  EXPECT_EQ(stats.model_stats(0).execution_count(), 1u);
  ASSERT_EQ(stats.model_stats(0).batch_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).batch_stats(0).batch_size(), 8u);
}

}  // namespace
}  // namespace kiln
