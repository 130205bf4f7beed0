#include "runtime/duration_stats.h"

#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

TEST(DurationStatsTest, FirstCallIsKeptApartFromSteadyState) {
  DurationStats s;
  s.Add(1000);  // cold
  for (int i = 1; i <= 100; ++i) s.Add(i);
  DurationSnapshot d = s.Snapshot();
  EXPECT_EQ(d.count, 101);
  EXPECT_EQ(d.first_ns, 1000);
  EXPECT_EQ(d.steady_count, 100);
  EXPECT_EQ(d.steady_total_ns, 5050);
  EXPECT_DOUBLE_EQ(d.steady_mean_ns, 50.5);
  EXPECT_EQ(d.p50_ns, 50);
  EXPECT_EQ(d.p90_ns, 90);
  EXPECT_EQ(d.p99_ns, 99);
  EXPECT_EQ(d.min_ns, 1);
  EXPECT_EQ(d.max_ns, 1000);
  EXPECT_EQ(d.total_ns, 6050);
}

TEST(DurationStatsTest, PercentilesCoverOnlyTheRecentWindow) {
  DurationStats s;
  s.Add(0);
  for (int i = 0; i < DurationStats::kWindow; ++i) s.Add(1000000);
  for (int i = 0; i < DurationStats::kWindow; ++i) s.Add(7);
  EXPECT_EQ(s.Snapshot().p99_ns, 7);
}

}  // namespace
}  // namespace kiln::runtime
