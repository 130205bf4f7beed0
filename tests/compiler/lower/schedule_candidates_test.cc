// Schedule candidates: the estimate's plan first, then distinct plans the
// planner accepts, by estimated cycles, each layout that applies among them.
#include "compiler/lower/schedule_candidates.h"

#include <set>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace kiln::lower {
namespace {

using Layout = ContractionPlan::Layout;

ContractionShape Gemm(int64_t m, int64_t n, int64_t k) {
  ContractionShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.k_outer = k;
  return s;
}

// resnet18's 512-channel 3x3 conv on a 7x7 output (as in contraction_plan_test):
// every layout applies.
ContractionShape SmallPlaneConv() {
  ContractionShape s = Gemm(512, 7 * 9, 512 * 9);
  s.k_outer = 512;
  s.flat_store_scatters = true;
  s.row_tiles_apply = true;
  s.n_inner = 9;
  s.channel_lanes_apply = true;
  s.lanes_joined = s.lanes_apart = {true, 49, 1};
  s.conv_input_has_slack = true;
  s.conv_input_bytes = 512 * 9 * 9 * 4;
  return s;
}

// The plan `o` gives, and its estimated cycles over the whole batch.
double CostOf(const ContractionShape& s, const ScheduleOverride& o) {
  std::string ignored;
  const ContractionPlan p = PlanContraction(s, {}, &o, &ignored);
  EXPECT_EQ(ignored, "") << o.ToString();
  return p.tile.cost * (p.layout == Layout::kChannelLanes ? 1 : s.batch);
}

TEST(ScheduleCandidatesTest, EstimateFirstThenDistinctPlansByEstimatedCost) {
  const ContractionShape s = Gemm(300, 500, 256);
  CandidateOptions options;
  options.max_candidates = 10;
  const std::vector<ScheduleOverride> c = ScheduleCandidates(s, options);
  ASSERT_EQ(c.size(), 11u);
  EXPECT_EQ(c[0], OverrideOf(PlanContraction(s)));
  std::set<std::string> seen;
  for (const ScheduleOverride& o : c) EXPECT_TRUE(seen.insert(o.ToString()).second) << o.ToString();
  for (size_t i = 2; i < c.size(); ++i) {
    EXPECT_LE(CostOf(s, c[i - 1]), CostOf(s, c[i]))
        << c[i - 1].ToString() << " then " << c[i].ToString();
  }
  // Nothing estimated cheaper than the last one taken was left out.
  const double last = CostOf(s, c.back());
  for (int mr = 1; mr <= kMaxTileRows; ++mr) {
    for (int nv = 1; nv <= kMaxTileVectors; ++nv) {
      if (!TileIsLegal(mr, nv)) continue;
      if (TileCost(mr, nv, s.m, s.n, s.k, 1, 1) < last) {
        ScheduleOverride o;
        o.layout = Layout::kFlatTiles;
        o.mr = mr;
        o.nv = nv;
        std::string ignored;
        const ScheduleOverride full = OverrideOf(PlanContraction(s, {}, &o, &ignored));
        EXPECT_TRUE(seen.count(full.ToString())) << full.ToString();
      }
    }
  }
}

TEST(ScheduleCandidatesTest, EveryLayoutThatAppliesIsAmongThem) {
  CandidateOptions options;
  options.max_candidates = 200;
  std::set<Layout> layouts;
  for (const ScheduleOverride& o : ScheduleCandidates(SmallPlaneConv(), options)) {
    CostOf(SmallPlaneConv(), o);  // accepted as it is
    layouts.insert(*o.layout);
  }
  EXPECT_EQ(layouts.size(), 3u);
  // A plain GEMM has flat tiles only.
  layouts.clear();
  for (const ScheduleOverride& o : ScheduleCandidates(Gemm(64, 64, 64), options)) {
    layouts.insert(*o.layout);
  }
  EXPECT_EQ(layouts, std::set<Layout>{Layout::kFlatTiles});
}

// 3072 x 3072 of K = 4096 (48 MB of A) takes K blocks by estimate; its twin
// without them is a candidate, right after it (the same estimated cycles).
TEST(ScheduleCandidatesTest, KBlockedPlansComeWithTheirUnblockedTwin) {
  const ContractionShape s = Gemm(3072, 3072, 4096);
  const std::vector<ScheduleOverride> c = ScheduleCandidates(s);
  ASSERT_GT(c[0].k_block_span, 0);
  bool twin = false;
  for (const ScheduleOverride& o : c) {
    twin |= o.mr == c[0].mr && o.nv == c[0].nv && o.k_block_span == 0;
  }
  EXPECT_TRUE(twin);
}

// mobilenet_v3's 672 -> 112 channel 1x1 conv over blocked channels: the
// estimate keeps 7x16, and the tuner gets to time 3x112 (all 112 channels
// in one tile, as a "tile=3x112" record would force) and every tile of
// five to seven vectors that fits the registers, all accepted as they are.
TEST(ScheduleCandidatesTest, WideTilesAreAmongThem) {
  ContractionShape s = Gemm(196, 112, 672);
  s.k_outer = 42;
  s.channel_blocks = true;
  CandidateOptions options;
  options.max_candidates = 200;
  std::set<std::pair<int, int>> tiles;
  for (const ScheduleOverride& o : ScheduleCandidates(s, options)) {
    CostOf(s, o);
    tiles.insert({o.mr, o.nv});
  }
  for (int nv = 5; nv <= kMaxTileVectors; ++nv) {
    for (int mr = 1; mr <= kMaxTileRows; ++mr) {
      EXPECT_EQ(tiles.count({mr, nv}), TileIsLegal(mr, nv) ? 1u : 0u) << mr << "x" << nv * 16;
    }
  }
}

}  // namespace
}  // namespace kiln::lower
