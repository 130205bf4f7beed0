#include "engine/inference_statistics.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

TEST(InferenceStatisticsTest, CountsRequestsExecutionsAndBatchSizes) {
  InferenceStatistics stats;
  // Three requests of 2, 2 and 1 rows: the two of 2 batched into one run of 4.
  stats.RecordSuccess("m", 1, {100, 10, 1, 2, 3, 2});
  stats.RecordSuccess("m", 1, {200, 20, 1, 2, 3, 2});
  stats.RecordExecution("m", 1, {4, 1, 2, 3});
  stats.RecordSuccess("m", 1, {50, 5, 4, 5, 6, 1});
  stats.RecordExecution("m", 1, {1, 4, 5, 6});
  stats.RecordFailure("m", 1, 7);
  const int64_t before_ms = absl::ToUnixMillis(absl::Now());
  stats.RecordFailure("m", 1, 8);

  ModelStatsSnapshot s = stats.Get("m", 1);
  EXPECT_EQ(s.name, "m");
  EXPECT_EQ(s.version, 1);
  EXPECT_EQ(s.success.count, 3);
  EXPECT_EQ(s.success.ns, 350);
  EXPECT_EQ(s.fail.count, 2);
  EXPECT_EQ(s.fail.ns, 15);
  EXPECT_EQ(s.queue.count, 3);
  EXPECT_EQ(s.queue.ns, 35);
  EXPECT_EQ(s.compute_input.ns, 6);
  EXPECT_EQ(s.compute_infer.ns, 9);
  EXPECT_EQ(s.compute_output.count, 3);
  EXPECT_EQ(s.compute_output.ns, 12);
  EXPECT_EQ(s.inference_count, 5);
  EXPECT_EQ(s.execution_count, 2);
  EXPECT_GE(s.last_inference_ms, before_ms);
  ASSERT_EQ(s.batch_stats.size(), 2u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 1);
  EXPECT_EQ(s.batch_stats[0].compute_infer.count, 1);
  EXPECT_EQ(s.batch_stats[0].compute_infer.ns, 5);
  EXPECT_EQ(s.batch_stats[1].batch_size, 4);
  EXPECT_EQ(s.batch_stats[1].compute_input.ns, 1);
  EXPECT_EQ(s.batch_stats[1].compute_output.ns, 3);
}

TEST(InferenceStatisticsTest, KeepsVersionsApartAndForgetsUnloadedModels) {
  InferenceStatistics stats;
  stats.RecordCompile("m", 1, {3, 30}, {2, 2000});
  stats.RecordCompile("m", 2, {5, 50}, {0, 0});
  stats.RecordSuccess("n", 1, {});
  EXPECT_EQ(stats.Get("m", 1).cache_hit.count, 3);
  EXPECT_EQ(stats.Get("m", 1).cache_miss.ns, 2000);
  EXPECT_EQ(stats.Get("m", 2).cache_hit.count, 5);
  ASSERT_EQ(stats.Snapshot().size(), 3u);
  EXPECT_EQ(stats.Snapshot()[1].version, 2);

  stats.Forget("m");
  ASSERT_EQ(stats.Snapshot().size(), 1u);
  EXPECT_EQ(stats.Snapshot()[0].name, "n");
  const ModelStatsSnapshot gone = stats.Get("m", 1);
  EXPECT_EQ(gone.name, "m");
  EXPECT_EQ(gone.cache_hit.count, 0);
  EXPECT_EQ(gone.success.count, 0);
}

TEST(InferenceStatisticsTest, KeepOnlyDropsTheOtherVersionsOfOneName) {
  InferenceStatistics stats;
  for (int64_t v : {1, 2, 3}) stats.RecordSuccess("m", v, {});
  stats.RecordSuccess("m2", 1, {});
  stats.RecordSuccess("l", 1, {});
  stats.KeepOnly("m", 2);
  std::vector<std::pair<std::string, int64_t>> left;
  for (const ModelStatsSnapshot& s : stats.Snapshot()) left.emplace_back(s.name, s.version);
  EXPECT_EQ(left, (std::vector<std::pair<std::string, int64_t>>{{"l", 1}, {"m", 2}, {"m2", 1}}));
  EXPECT_EQ(stats.Get("m", 2).success.count, 1);
}

}  // namespace
}  // namespace kiln::engine
