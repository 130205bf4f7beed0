#include "engine/request_histograms.h"

#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

RequestTimes Times(int64_t total_ns, int64_t queue_ns, int64_t infer_ns) {
  RequestTimes t;
  t.total_ns = total_ns;
  t.queue_ns = queue_ns;
  t.compute_infer_ns = infer_ns;
  return t;
}

TEST(RequestHistogramsTest, EachTimeLandsInTheFirstBucketAtOrAboveIt) {
  RequestHistograms h;
  h.Record("m", 1, Times(1000000, 50000, 20000000000));  // 1 ms, 50 us, 20 s
  h.Record("m", 1, Times(1000001, 100000, 0));           // just over 1 ms, 100 us, 0
  const std::vector<ModelLatency> all = h.Snapshot();
  ASSERT_EQ(all.size(), 1u);
  const ModelLatency& m = all[0];
  EXPECT_EQ(m.name, "m");
  EXPECT_EQ(m.version, 1);
  // Bounds: 0.0001 0.00025 0.0005 0.001 0.0025 ...
  EXPECT_EQ(m.request.counts[3], 1);  // le 0.001
  EXPECT_EQ(m.request.counts[4], 1);  // le 0.0025
  EXPECT_EQ(m.request.count, 2);
  EXPECT_EQ(m.request.sum_ns, 2000001);
  EXPECT_EQ(m.queue.counts[0], 2);                                      // both <= 100 us
  EXPECT_EQ(m.compute_infer.counts[0], 1);                              // 0
  EXPECT_EQ(m.compute_infer.counts[kLatencyBucketsSeconds.size()], 1);  // 20 s: past 10 s
}

TEST(RequestHistogramsTest, ForgetAndKeepOnlyDropVersions) {
  RequestHistograms h;
  h.Record("a", 1, Times(1, 0, 0));
  h.Record("a", 2, Times(1, 0, 0));
  h.Record("b", 1, Times(1, 0, 0));
  h.KeepOnly("a", 2);
  std::vector<ModelLatency> all = h.Snapshot();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "a");
  EXPECT_EQ(all[0].version, 2);
  EXPECT_EQ(all[1].name, "b");
  h.Forget("a");
  all = h.Snapshot();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "b");
}

}  // namespace
}  // namespace kiln::engine
