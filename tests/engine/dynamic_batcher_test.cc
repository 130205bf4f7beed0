// Dynamic batching over a model with a symbolic batch (y = relu(x) * 2):
// requests join into one run, each caller gets exactly its own rows, a
// batch is padded to a preferred size, errors reach every caller in the run,
// and nothing queued is lost when the batcher goes.
#include "engine/dynamic_batcher.h"

#include <algorithm>
#include <optional>

#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/symbolic_batch_model.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::Pseudorandom;
using ::testing::HasSubstr;
using runtime::Tensor;

// A delay no test waits for: batches in these tests run because they are
// full or blocked, so the tests do not depend on timing.
constexpr int64_t kLongDelayUs = 10'000'000;

class DynamicBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelManagerOptions options;
    options.cache.dir.clear();
    auto m = ModelManager::Create(options);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
    absl::StatusOr<Graph> g = BatchModelGraph({{"x", {1, kWidth}}}, nullptr);
    ASSERT_TRUE(g.ok());
    SymbolicModel symbolic;
    symbolic.signature = BatchModelSignature(false);
    symbolic.graph_for = [](const ShapeBinding& s, const ValueBinding&) {
      return BatchModelGraph(s, nullptr);
    };
    auto compiled = manager_->CompileWithShapes("m", *std::move(g), std::move(symbolic),
                                                CompileOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
  }

  std::unique_ptr<DynamicBatcher> MakeBatcher(DynamicBatchingConfig config) {
    return std::make_unique<DynamicBatcher>(
        config,
        [this](const std::vector<std::vector<int64_t>>& shapes) {
          ++runs_by_rows_[shapes[0][0]];
          return manager_->FindForShapes("m", shapes);
        },
        stats_);
  }

  // One request of `rows` rows: its input, and where its answer lands.
  struct Call {
    std::vector<float> x;
    std::optional<absl::StatusOr<runtime::RunResult>> answer;
  };

  void Submit(DynamicBatcher& batcher, Call& call, int64_t rows, uint32_t seed) {
    call.x = Pseudorandom(rows * kWidth, seed);
    auto input = Tensor::FromBytes({DType::kFloat32, {rows, kWidth}},
                                   absl::string_view(reinterpret_cast<const char*>(call.x.data()),
                                                     call.x.size() * sizeof(float)));
    ASSERT_TRUE(input.ok());
    std::vector<Tensor> inputs;
    inputs.push_back(*std::move(input));
    batcher.Submit(std::move(inputs), [&call](absl::StatusOr<runtime::RunResult> r) {
      call.answer = std::move(r);
    });
  }

  // The call's answer holds relu(x) * 2 of its own rows, and only those.
  static void ExpectOwnRows(const Call& call) {
    ASSERT_TRUE(call.answer.has_value());
    ASSERT_TRUE(call.answer->ok()) << call.answer->status();
    const Tensor& y = (*call.answer)->outputs.at(0);
    const int64_t rows = static_cast<int64_t>(call.x.size()) / kWidth;
    ASSERT_EQ(y.type().shape, (std::vector<int64_t>{rows, kWidth}));
    const float* v = static_cast<const float*>(y.data());
    for (size_t i = 0; i < call.x.size(); ++i) ASSERT_EQ(v[i], std::max(0.0f, call.x[i]) * 2) << i;
  }

  std::unique_ptr<ModelManager> manager_;
  std::shared_ptr<BatchStatistics> stats_ = std::make_shared<BatchStatistics>();
  std::map<int64_t, int> runs_by_rows_;
};

TEST_F(DynamicBatcherTest, RequestsThatFillABatchRunOnceAndEachGetsItsOwnRows) {
  auto batcher = MakeBatcher({/*max_batch_size=*/16, /*preferred=*/{8}, kLongDelayUs});
  std::vector<Call> calls(4);
  const int64_t rows[] = {1, 2, 3, 2};  // 8 rows: the preferred size, so it runs at once
  for (int i = 0; i < 4; ++i) Submit(*batcher, calls[i], rows[i], 100 + i);
  batcher.reset();  // waits for the run
  for (const Call& c : calls) ExpectOwnRows(c);
  EXPECT_EQ(runs_by_rows_, (std::map<int64_t, int>{{8, 1}}));
  BatchStatisticsSnapshot s = stats_->Snapshot();
  ASSERT_EQ(s.batches.size(), 1u);
  EXPECT_EQ(s.batches[0].batch_size, 8);
  EXPECT_EQ(s.batches[0].count, 1);
  EXPECT_EQ(s.queue.count, 4);
  EXPECT_EQ(s.padded_rows, 0);
}

TEST_F(DynamicBatcherTest, ABatchIsPaddedToTheSmallestPreferredSizeThatHoldsIt) {
  auto batcher = MakeBatcher({/*max_batch_size=*/16, /*preferred=*/{4, 8}, /*delay=*/0});
  Call call;
  Submit(*batcher, call, 3, 7);
  batcher.reset();
  ExpectOwnRows(call);
  EXPECT_EQ(runs_by_rows_, (std::map<int64_t, int>{{4, 1}}));  // ran at 4 rows, not 3
  BatchStatisticsSnapshot s = stats_->Snapshot();
  ASSERT_EQ(s.batches.size(), 1u);
  EXPECT_EQ(s.batches[0].batch_size, 3);
  EXPECT_EQ(s.padded_rows, 1);
  EXPECT_NE(manager_->Get("m")->variants->Peek({{4, kWidth}}), nullptr);
  EXPECT_EQ(manager_->Get("m")->variants->Peek({{3, kWidth}}), nullptr);
}

TEST_F(DynamicBatcherTest, ARequestThatDoesNotFitStartsTheNextBatch) {
  auto batcher = MakeBatcher({/*max_batch_size=*/8, /*preferred=*/{}, kLongDelayUs});
  std::vector<Call> calls(3);
  // 5 + 4 > 8: the first runs alone (padded to 8, the next power of two)
  // as soon as the second cannot join; the second and third (4 + 4) fill
  // the next batch.
  Submit(*batcher, calls[0], 5, 1);
  Submit(*batcher, calls[1], 4, 2);
  Submit(*batcher, calls[2], 4, 3);
  batcher.reset();
  for (const Call& c : calls) ExpectOwnRows(c);
  EXPECT_EQ(runs_by_rows_, (std::map<int64_t, int>{{8, 2}}));
  EXPECT_EQ(stats_->Snapshot().padded_rows, 3);
}

TEST_F(DynamicBatcherTest, AFailedRunAnswersEveryCallerInItWithTheError) {
  // The model refuses batch 13 (symbolic_batch_model.h).
  auto batcher = MakeBatcher({/*max_batch_size=*/16, /*preferred=*/{13}, kLongDelayUs});
  std::vector<Call> calls(2);
  Submit(*batcher, calls[0], 6, 1);
  Submit(*batcher, calls[1], 7, 2);
  batcher.reset();
  for (const Call& c : calls) {
    ASSERT_TRUE(c.answer.has_value());
    EXPECT_EQ(c.answer->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.answer->status().message()), HasSubstr("batch 13"));
  }
}

TEST_F(DynamicBatcherTest, RequestsItCannotTakeAreRefusedAtOnce) {
  auto batcher = MakeBatcher({/*max_batch_size=*/4, /*preferred=*/{}, kLongDelayUs});
  Call big;
  Submit(*batcher, big, 5, 1);
  ASSERT_TRUE(big.answer.has_value());  // answered inside Submit
  EXPECT_EQ(big.answer->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.answer->status().message()), HasSubstr("max_batch_size (4)"));
  std::optional<absl::Status> mismatch;
  std::vector<Tensor> inputs;
  inputs.push_back(*Tensor::Allocate({DType::kFloat32, {2, kWidth}}));
  inputs.push_back(*Tensor::Allocate({DType::kFloat32, {3, kWidth}}));
  batcher->Submit(std::move(inputs), [&](absl::StatusOr<runtime::RunResult> r) {
    mismatch = r.status();
  });
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_EQ(mismatch->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatch->message()), HasSubstr("same first dim"));
}

TEST_F(DynamicBatcherTest, WhatIsQueuedWhenTheBatcherGoesIsStillAnswered) {
  // Nothing fills this batch and its delay is long: only the destructor
  // makes it run.
  auto batcher = MakeBatcher({/*max_batch_size=*/16, /*preferred=*/{}, kLongDelayUs});
  std::vector<Call> calls(2);
  Submit(*batcher, calls[0], 2, 1);
  Submit(*batcher, calls[1], 3, 2);
  batcher.reset();
  for (const Call& c : calls) ExpectOwnRows(c);
  EXPECT_EQ(runs_by_rows_, (std::map<int64_t, int>{{8, 1}}));
}

TEST_F(DynamicBatcherTest, AModelWithoutABatchAxisCannotBeBatched) {
  ModelSignature fixed = BatchModelSignature(false);
  fixed.inputs[0].dims[0] = 1;
  fixed.inputs[0].symbols[0].clear();
  absl::Status s = ValidateDynamicBatching({8, {}, 0}, fixed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'x' has a fixed dim 0 of 1"));
  EXPECT_EQ(ValidateDynamicBatching({8, {16}, 0}, BatchModelSignature(false)).code(),
            absl::StatusCode::kInvalidArgument);  // preferred above max
  EXPECT_EQ(ValidateDynamicBatching({0, {}, 100}, BatchModelSignature(false)).code(),
            absl::StatusCode::kInvalidArgument);  // a delay without batching
  EXPECT_TRUE(ValidateDynamicBatching({8, {2, 8}, 100}, BatchModelSignature(false)).ok());
}

}  // namespace
}  // namespace kiln::engine
