// ModelStatistics and ModelConfig against a kiln-server process, asked as
// Triton's Python client asks (get_inference_statistics, get_model_config):
// the counts match the calls this test made, one by one. model_statistics_test
// runs ModelInfer on the spin loop (the default), model_statistics_sync_test
// on gRPC's sync threads (KILN_INFER_SPIN_US=0).
#include <chrono>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::ExpectMlpRows;
using ::kiln::testing::MlpRowsRequest;
using ::kiln::testing::ServerProcess;
using ::testing::ElementsAre;

class ModelStatisticsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string root = testing::TestTmpDir("model_statistics_test");
    const std::string repo = testing::WriteRepository(root, {"stats_mlp", "config_mlp"});
    std::vector<std::string> flags = {"--model-repository=" + repo, "--model-control-mode=explicit",
                                      "--load-model=*"};
#ifdef KILN_INFER_SPIN_US
    flags.push_back("--infer-spin-us=" + std::to_string(KILN_INFER_SPIN_US));
#endif
    server_ = new ServerProcess(root + "/cache", flags);
    ASSERT_GT(server_->port(), 0);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    inference_ = inference::GRPCInferenceService::NewStub(ChannelTo(*server_));
  }

  inference::ModelStatistics Statistics(const std::string& model) {
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    inference::ModelStatisticsResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = inference_->ModelStatistics(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_stats_size(), 1);
    return response.model_stats_size() == 1 ? response.model_stats(0)
                                            : inference::ModelStatistics();
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    return inference_->ModelInfer(&ctx, request, response);
  }

  static ServerProcess* server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
};

ServerProcess* ModelStatisticsTest::server_ = nullptr;

// Three successes (1, 2 and 2 rows; the last as async_infer sends it) and
// one failure (a wrong dim): success 3, fail 1, 5 rows in 3 runs, batch
// stats for sizes 1 and 2.
TEST_F(ModelStatisticsTest, CountsSuccessesFailuresRowsAndRunsPerBatchSize) {
  const int64_t before_ms = absl::ToUnixMillis(absl::Now());
  {
    inference::ModelInferResponse response;
    grpc::Status s = Infer(MlpRowsRequest("stats_mlp", 0, 1), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectMlpRows(response, 0, 1);
  }
  {
    inference::ModelInferResponse response;
    grpc::Status s = Infer(MlpRowsRequest("stats_mlp", 1, 2), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectMlpRows(response, 1, 2);
  }
  {
    // async_infer: the call's answer comes to a callback.
    grpc::ClientContext ctx;
    const inference::ModelInferRequest request = MlpRowsRequest("stats_mlp", 3, 2);
    inference::ModelInferResponse response;
    absl::Notification done;
    grpc::Status status;
    inference_->async()->ModelInfer(&ctx, &request, &response, [&](grpc::Status s) {
      status = s;
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ExpectMlpRows(response, 3, 2);
  }
  {
    inference::ModelInferRequest wrong;
    wrong.set_model_name("stats_mlp");
    testing::AddInput(wrong, "x", "FP32", {2, 15});
    wrong.add_raw_input_contents(std::string(2 * 15 * sizeof(float), '\0'));
    inference::ModelInferResponse response;
    EXPECT_EQ(Infer(wrong, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const int64_t after_ms = absl::ToUnixMillis(absl::Now());

  const inference::ModelStatistics s = Statistics("stats_mlp");
  EXPECT_EQ(s.name(), "stats_mlp");
  EXPECT_EQ(s.version(), "1");
  const inference::InferStatistics& i = s.inference_stats();
  EXPECT_EQ(i.success().count(), 3u);
  EXPECT_EQ(i.fail().count(), 1u);
  EXPECT_GT(i.success().ns(), 0u);
  EXPECT_GT(i.fail().ns(), 0u);
  for (const inference::StatisticDuration* d :
       {&i.queue(), &i.compute_input(), &i.compute_infer(), &i.compute_output()}) {
    EXPECT_EQ(d->count(), 3u);
  }
  EXPECT_GT(i.compute_infer().ns(), 0u);
  // Each success's phases lie within its whole time.
  EXPECT_LE(
      i.queue().ns() + i.compute_input().ns() + i.compute_infer().ns() + i.compute_output().ns(),
      i.success().ns());
  EXPECT_EQ(s.inference_count(), 5u);
  EXPECT_EQ(s.execution_count(), 3u);
  EXPECT_GE(s.last_inference(), static_cast<uint64_t>(before_ms));
  EXPECT_LE(s.last_inference(), static_cast<uint64_t>(after_ms));
  ASSERT_EQ(s.batch_stats_size(), 2);
  EXPECT_EQ(s.batch_stats(0).batch_size(), 1u);
  EXPECT_EQ(s.batch_stats(0).compute_infer().count(), 1u);
  EXPECT_EQ(s.batch_stats(1).batch_size(), 2u);
  EXPECT_EQ(s.batch_stats(1).compute_infer().count(), 2u);
  EXPECT_GT(s.batch_stats(1).compute_infer().ns(), 0u);
  EXPECT_EQ(s.batch_stats(1).compute_input().count(), 2u);
  EXPECT_EQ(s.batch_stats(1).compute_output().count(), 2u);
  // Its load compiled or found its kernels: six dense/relu/softmax groups
  // at most, at least one.
  const uint64_t kernels = i.cache_hit().count() + i.cache_miss().count();
  EXPECT_GE(kernels, 1u);

  // Loading it again finds every kernel in the cache; the counts go on.
  {
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("stats_mlp");
    inference::RepositoryModelLoadResponse loaded;
    grpc::ClientContext ctx;
    grpc::Status st = inference_->RepositoryModelLoad(&ctx, load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const inference::ModelStatistics again = Statistics("stats_mlp");
  EXPECT_EQ(again.inference_stats().cache_hit().count(), i.cache_hit().count() + kernels);
  EXPECT_EQ(again.inference_stats().cache_miss().count(), i.cache_miss().count());
  EXPECT_EQ(again.inference_stats().success().count(), 3u);
}

// Dynamic batching: five concurrent requests of 8 rows in all run as one
// batch of 8 (preferred size 8, a delay no test waits out): five successes,
// eight rows, one execution.
TEST_F(ModelStatisticsTest, BatchedRequestsCountOnceAsAnExecution) {
  testing::CompileBatchingMlp(ChannelTo(*server_), "batched_mlp", 16, 8);
  const std::vector<std::pair<int64_t, int64_t>> calls = {{0, 1}, {1, 2}, {6, 1}, {3, 3}, {2, 1}};
  std::vector<grpc::Status> status(calls.size());
  std::vector<inference::ModelInferResponse> responses(calls.size());
  std::vector<std::thread> clients;
  for (size_t c = 0; c < calls.size(); ++c) {
    clients.emplace_back([&, c] {
      status[c] =
          Infer(MlpRowsRequest("batched_mlp", calls[c].first, calls[c].second), &responses[c]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t c = 0; c < calls.size(); ++c) {
    ASSERT_TRUE(status[c].ok()) << status[c].error_message();
    ExpectMlpRows(responses[c], calls[c].first, calls[c].second);
  }
  const inference::ModelStatistics s = Statistics("batched_mlp");
  EXPECT_EQ(s.inference_stats().success().count(), 5u);
  EXPECT_EQ(s.inference_stats().fail().count(), 0u);
  EXPECT_EQ(s.inference_stats().queue().count(), 5u);
  EXPECT_GT(s.inference_stats().queue().ns(), 0u);
  EXPECT_EQ(s.inference_count(), 8u);
  EXPECT_EQ(s.execution_count(), 1u);
  ASSERT_EQ(s.batch_stats_size(), 1);
  EXPECT_EQ(s.batch_stats(0).batch_size(), 8u);
  EXPECT_EQ(s.batch_stats(0).compute_infer().count(), 1u);
  EXPECT_GT(s.batch_stats(0).compute_infer().ns(), 0u);

  // Its configuration, as get_model_config reads it: Triton's convention
  // leaves the batch dim out of dims when max_batch_size > 0.
  inference::ModelConfigRequest request;
  request.set_name("batched_mlp");
  inference::ModelConfigResponse response;
  grpc::ClientContext ctx;
  grpc::Status st = inference_->ModelConfig(&ctx, request, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const inference::ModelConfig& c = response.config();
  EXPECT_EQ(c.name(), "batched_mlp");
  EXPECT_EQ(c.platform(), "kiln");
  EXPECT_EQ(c.max_batch_size(), 16);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "x");
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(16));
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).name(), "y");
  EXPECT_THAT(c.output(0).dims(), ElementsAre(5));
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ElementsAre(8));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 10'000'000u);
}

TEST_F(ModelStatisticsTest, ConfigOfModelsWithoutBatchingHasTheirWholeShapes) {
  for (const auto& [name, in_dims, out_name, out_dims] : std::vector<
           std::tuple<std::string, std::vector<int64_t>, std::string, std::vector<int64_t>>>{
           {"mlp", {4, 16}, "probs", {4, 10}}, {"config_mlp", {-1, 16}, "y", {-1, 5}}}) {
    SCOPED_TRACE(name);
    inference::ModelConfigRequest request;
    request.set_name(name);
    inference::ModelConfigResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = inference_->ModelConfig(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const inference::ModelConfig& c = response.config();
    EXPECT_EQ(c.name(), name);
    EXPECT_EQ(c.max_batch_size(), 0);
    EXPECT_FALSE(c.has_dynamic_batching());
    ASSERT_EQ(c.input_size(), 1);
    EXPECT_EQ(c.input(0).name(), "x");
    EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
    EXPECT_EQ(std::vector<int64_t>(c.input(0).dims().begin(), c.input(0).dims().end()), in_dims);
    ASSERT_EQ(c.output_size(), 1);
    EXPECT_EQ(c.output(0).name(), out_name);
    EXPECT_EQ(c.output(0).data_type(), inference::TYPE_FP32);
    EXPECT_EQ(std::vector<int64_t>(c.output(0).dims().begin(), c.output(0).dims().end()), out_dims);
  }
  inference::ModelConfigRequest unknown;
  unknown.set_name("no_such_model");
  inference::ModelConfigResponse response;
  grpc::ClientContext ctx;
  EXPECT_EQ(inference_->ModelConfig(&ctx, unknown, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// get_inference_statistics() with no name: every loaded model; an unknown
// name is NOT_FOUND; a model's version must be the one served.
TEST_F(ModelStatisticsTest, AllModelsUnknownNamesAndVersions) {
  {
    inference::ModelStatisticsResponse response;
    grpc::ClientContext ctx;
    grpc::Status s =
        inference_->ModelStatistics(&ctx, inference::ModelStatisticsRequest(), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> names;
    for (const inference::ModelStatistics& m : response.model_stats()) names.push_back(m.name());
    EXPECT_THAT(names, ::testing::IsSupersetOf({"config_mlp", "mlp", "stats_mlp"}));
    EXPECT_THAT(names, ::testing::Not(::testing::Contains("broken")));  // never loaded
  }
  for (const auto& [name, version, code] :
       std::vector<std::tuple<std::string, std::string, grpc::StatusCode>>{
           {"no_such_model", "", grpc::StatusCode::NOT_FOUND},
           {"mlp", "7", grpc::StatusCode::NOT_FOUND},
           {"mlp", "1", grpc::StatusCode::OK}}) {
    SCOPED_TRACE(name + " " + version);
    inference::ModelStatisticsRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelStatisticsResponse response;
    grpc::ClientContext ctx;
    EXPECT_EQ(inference_->ModelStatistics(&ctx, request, &response).error_code(), code);
  }
}

}  // namespace
}  // namespace kiln
