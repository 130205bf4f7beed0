// The contraction plan without loops or LLVM: each rule checked on a shape
// whose answer follows by hand from the rule's statement (contraction_plan.h
// and the design note in contraction_schedule.cc), and the analysis checked
// to hand the plan the shape a plain matmul has.
#include "compiler/lower/contraction_plan.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln::lower {
namespace {

using Layout = ContractionPlan::Layout;
using LoopOrder = ContractionPlan::LoopOrder;

ContractionShape Gemm(int64_t m, int64_t n, int64_t k) {
  ContractionShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.k_outer = k;
  return s;
}

// m = 1, n = k = 64: one tile row, so a taller tile only adds work; NV = 4
// covers N in one tile: per k step max(4 / 2, 1 + 4, 4) = 5 cycles, so
// 64 * 5 + 1 * 4 stores = 324. NV = 2 needs two tiles of max(1, 3, 4) = 4
// per step: 2 * (256 + 2) = 516; NV = 3 also two: 2 * (256 + 3) = 518.
TEST(ContractionPlanTest, ChooseTileByHand) {
  const Tile t = ChooseTile(1, 64, 64, 1, /*store_cycles=*/1);
  EXPECT_EQ(t.mr, 1);
  EXPECT_EQ(t.nr(), 64);
  EXPECT_DOUBLE_EQ(t.cost, 324);
}

// M = 49, N = 160, K = 960 (MobileNet's last projection convs), among tiles
// of at most four vectors. At a cycle per broadcast or load, 7x48 costs
// max(21 / 2, 7 + 3, 4) = 10.5 a step over 7 x 4 tiles: 28 * (960 * 10.5 +
// 21 stores) = 282828, below 7x32's max(7, 9, 4) = 9 over 7 x 5 tiles
// (302890). At half a cycle 7x32 takes max(7, 4.5, 4) = 7: 35 * (960 * 7 +
// 14) = 235690, and pads no columns. With five vectors, 5x80 takes
// max(12.5, 10, 4) = 12.5 a step, but its 300 KB panel streams from L2 at
// 5 lines / 24 bytes = 13.33: 20 * (960 * 13.33 + 25) = 256500, cheaper
// than 7x48 at a cycle, dearer than 7x32 at half.
TEST(ContractionPlanTest, OperandLoadCyclesChooseTheTileByHand) {
  ContractionKnobs knobs;
  const Tile one = ChooseTile(49, 160, 960, 1, /*store_cycles=*/1, knobs, /*max_vectors=*/4);
  EXPECT_EQ(one.mr, 7);
  EXPECT_EQ(one.nv, 3);
  EXPECT_DOUBLE_EQ(one.cost, 282828);
  const Tile wide = ChooseTile(49, 160, 960, 1, /*store_cycles=*/1, knobs);
  EXPECT_EQ(wide.mr, 5);
  EXPECT_EQ(wide.nv, 5);
  EXPECT_DOUBLE_EQ(wide.cost, 256500);
  knobs.operand_load_cycles = 0.5;
  const Tile half = ChooseTile(49, 160, 960, 1, /*store_cycles=*/1, knobs);
  EXPECT_EQ(half.mr, 7);
  EXPECT_EQ(half.nv, 2);
  EXPECT_DOUBLE_EQ(half.cost, 235690);
}

// M = 196, N = 80, K = 240 (mobilenet_v3's 14x14 convs to 80 channels) at
// half a cycle per operand: 5x80 takes max(25 / 2, 10 / 2, 4) = 12.5 a step,
// but its 75 KB panel streams from L2 at 5 lines / 24 bytes = 13.33, over
// 40 tiles: 40 * (240 * 13.33 + 25) = 129000, below 7x16's max(3.5, 4, 4) =
// 4 over 28 x 5 tiles, 140 * (960 + 7) = 135380, the best of at most four
// vectors.
TEST(ContractionPlanTest, FiveVectorTileByHand) {
  ContractionKnobs knobs;
  knobs.operand_load_cycles = 0.5;
  const Tile t = ChooseTile(196, 80, 240, 1, /*store_cycles=*/1, knobs);
  EXPECT_EQ(t.mr, 5);
  EXPECT_EQ(t.nv, 5);
  EXPECT_DOUBLE_EQ(t.cost, 129000);
  EXPECT_DOUBLE_EQ(TileCost(7, 1, 196, 80, 240, 1, 1, knobs), 135380);
}

// M = 784, N = 192, K = 32: 8x48 and 4x96 both take 12 cycles a step for 24
// FMAs over 392 whole tiles (159936); the tie goes to the tile of at most
// four vectors.
TEST(ContractionPlanTest, WideTilesLoseTies) {
  ContractionKnobs knobs;
  knobs.operand_load_cycles = 0.5;
  ASSERT_DOUBLE_EQ(TileCost(4, 6, 784, 192, 32, 1, 1, knobs), 159936);
  const Tile t = ChooseTile(784, 192, 32, 1, /*store_cycles=*/1, knobs);
  EXPECT_EQ(t.mr, 8);
  EXPECT_EQ(t.nv, 3);
  EXPECT_DOUBLE_EQ(t.cost, 159936);
}

// Up to seven vectors, and accumulators plus B vectors in 30 registers.
TEST(ContractionPlanTest, TileLegalityByHand) {
  EXPECT_TRUE(TileIsLegal(3, 7));   // 21 + 7
  EXPECT_FALSE(TileIsLegal(4, 7));  // 28 + 7
  EXPECT_TRUE(TileIsLegal(4, 6));   // 24 + 6
  EXPECT_TRUE(TileIsLegal(5, 5));   // 25 + 5
  EXPECT_FALSE(TileIsLegal(6, 5));  // 30 + 5
  EXPECT_FALSE(TileIsLegal(1, 8));
  EXPECT_FALSE(TileIsLegal(9, 1));
}

// mobilenet_v3's 672 -> 112 channel 1x1 conv, M = 196, N = 112, K = 672,
// over blocked channels at half a cycle per operand. 3x112 takes
// max(21 / 2, 10 / 2, 4) = 10.5 a step; its 301 KB panel streams 7 lines a
// step from L2, 18.67 cycles at 24 bytes a cycle, so 7x16 (4 a step, 7 x 28
// tiles: 196 * (672 * 4 + 7) = 528220) wins; at 48 bytes a cycle the stream
// takes 9.33 and 3x112 wins: 66 * (672 * 10.5 + 21) = 467082. The blocked
// channels' rate applies to flat tiles over blocked channels only.
TEST(ContractionPlanTest, BlockedChannelsTakeTheirOwnL2Rate) {
  ContractionShape s = Gemm(196, 112, 672);
  s.k_outer = 42;
  s.channel_blocks = true;
  ContractionKnobs knobs;
  knobs.operand_load_cycles = 0.5;
  const ContractionPlan slow = PlanContraction(s, knobs);
  EXPECT_EQ(slow.tile.mr, 7);
  EXPECT_EQ(slow.tile.nv, 1);
  EXPECT_DOUBLE_EQ(slow.tile.cost, 528220);
  knobs.blocked_channels_l2_bytes_per_cycle = 48;
  const ContractionPlan fast = PlanContraction(s, knobs);
  EXPECT_EQ(fast.tile.mr, 3);
  EXPECT_EQ(fast.tile.nv, 7);
  EXPECT_DOUBLE_EQ(fast.tile.cost, 467082);
  EXPECT_EQ(fast.k_block_span, 0);  // one column block
  // A forced tile is costed at the same rate.
  ScheduleOverride o;
  o.mr = 3;
  o.nv = 7;
  EXPECT_DOUBLE_EQ(PlanContraction(s, knobs, &o).tile.cost, 467082);
  s.channel_blocks = false;
  EXPECT_EQ(PlanContraction(s, knobs).tile.nv, 1);
  knobs.l2_bytes_per_cycle = 48;
  EXPECT_EQ(PlanContraction(s, knobs).tile.nv, 7);
}

// The host's knobs take half a cycle, and 48 bytes a cycle from L2 for
// blocked channels, exactly on AMD processors, as /proc/cpuinfo names the
// vendor.
TEST(ContractionPlanTest, HostKnobsFollowTheCpuVendor) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
  ASSERT_FALSE(vendor.empty()) << "no vendor_id in /proc/cpuinfo";
  EXPECT_DOUBLE_EQ(HostContractionKnobs().operand_load_cycles, vendor == "AuthenticAMD" ? 0.5 : 1.0)
      << vendor;
  EXPECT_DOUBLE_EQ(HostContractionKnobs().blocked_channels_l2_bytes_per_cycle,
                   vendor == "AuthenticAMD" ? 48 : 24)
      << vendor;
  EXPECT_DOUBLE_EQ(HostContractionKnobs().l2_bytes_per_cycle, 24);
}

// K blocks pay only once packed A passes 32 MB: 2048^3 has about 16 MB of
// A, 3072 x 3072 of K = 4096 about 48 MB, with 48 column blocks re-reading it.
TEST(ContractionPlanTest, KBlocksOnlyPastThirtyTwoMegabytesOfA) {
  const ContractionPlan small = PlanContraction(Gemm(2048, 2048, 2048));
  EXPECT_EQ(small.k_block_span, 0);
  EXPECT_THAT(small.Summary(), ::testing::Not(::testing::HasSubstr("K blocks")));

  const ContractionPlan big = PlanContraction(Gemm(3072, 3072, 4096));
  ASSERT_GT(big.k_block_span, 0);
  // A K block keeps 24 KB of B (NR floats a row) in L1: the span is the
  // largest divisor of K that fits, and at least half of it.
  const int64_t rows_in_l1 = (24 << 10) / (big.tile.nr() * 4);
  EXPECT_EQ(4096 % big.k_block_span, 0);
  EXPECT_LE(big.k_block_span, rows_in_l1);
  EXPECT_GT(big.k_block_span * 2, rows_in_l1);
  // Cache groups: 8 of the column blocks (at least two groups remain), and
  // row blocks dividing the row blocks whose partial sums and K block of A
  // fit 512 KB.
  EXPECT_EQ(big.loop_order, LoopOrder::kCacheGroups);
  EXPECT_EQ(big.group_col_blocks, 8);
  EXPECT_EQ(big.mb % big.group_row_blocks, 0);
  const int64_t group_bytes =
      big.group_row_blocks * big.tile.mr * (8 * big.tile.nr() + big.k_block_span) * 4;
  EXPECT_LE(group_bytes, 512 << 10);
  EXPECT_THAT(big.Summary(), ::testing::EndsWith(absl::StrCat(" (K blocks) (cache groups 8x",
                                                              big.group_row_blocks, ")")));
}

TEST(ContractionPlanTest, KnobsAreHonoured) {
  ContractionKnobs knobs;
  knobs.k_block_ap_bytes = 1 << 20;  // K blocks from 1 MB of A
  EXPECT_GT(PlanContraction(Gemm(1024, 1024, 1024), knobs).k_block_span, 0);
  knobs = {};
  knobs.parallel_work = int64_t{1} << 40;  // nothing is worth threads
  const ContractionPlan serial = PlanContraction(Gemm(256, 256, 256), knobs);
  EXPECT_FALSE(serial.parallel);
  EXPECT_EQ(serial.loop_order, LoopOrder::kBlocks);
  EXPECT_TRUE(PlanContraction(Gemm(256, 256, 256)).parallel);
}

// Work enough for threads, one image, no K blocks: every tile in one
// parallel loop.
TEST(ContractionPlanTest, OneParallelLoopOverAllTiles) {
  const ContractionPlan p = PlanContraction(Gemm(256, 256, 256));
  EXPECT_EQ(p.loop_order, LoopOrder::kTilesInParallel);
  EXPECT_EQ(p.pixel_parts, 1);  // without channel lanes the columns are the pixels
  EXPECT_EQ(p.mb, (256 + p.tile.mr - 1) / p.tile.mr);
  EXPECT_EQ(p.nb, (256 + p.tile.nr() - 1) / p.tile.nr());
}

// A depthwise conv over padded rows: M = 1 channel, K = 9, N = 112 rows of
// 114 padded columns; flat tiles would scatter every output vector, which
// K = 9 cannot hide, so each row is tiled on its own.
TEST(ContractionPlanTest, DepthwiseConvTakesRowTiles) {
  ContractionShape s = Gemm(1, 112 * 114, 9);
  s.k_outer = 3;
  s.batch = 32;  // the channels
  s.flat_store_scatters = true;
  s.row_tiles_apply = true;
  s.n_inner = 114;
  const ContractionPlan p = PlanContraction(s);
  EXPECT_EQ(p.layout, Layout::kRowTiles);
  EXPECT_EQ(p.n, 114);
  EXPECT_EQ(p.batch, 32 * 112);
  EXPECT_THAT(p.Summary(), ::testing::HasSubstr("N=114 K=9 batch=3584 (row tiles)"));
  s.row_tiles_apply = false;  // B not readable along the row: flat tiles stay
  EXPECT_EQ(PlanContraction(s).layout, Layout::kFlatTiles);
}

// Batch rows: a one-row tile takes as many output rows of its channel as
// computes the fewest rows, between half of 8 (or of 12 accumulators over
// its vectors) and all of them: 14 rows in 2 blocks of 7, 7 in one,
// 13 in 2 of 7; 4-vector tiles at most 3 rows; none where the tile has
// rows of its own (M > 1).
TEST(ContractionPlanTest, BatchRowsByHand) {
  auto depthwise = [](int64_t rows, int64_t width) {
    ContractionShape s = Gemm(1, rows * (width + 2), 9);
    s.k_outer = 3;
    s.batch = 32;
    s.inner_batch = 32;
    s.flat_store_scatters = true;
    s.row_tiles_apply = true;
    s.n_inner = width + 2;
    s.inner_batch_row_tiles = rows;
    return s;
  };
  for (const auto& [rows, want] :
       std::vector<std::pair<int64_t, int64_t>>{{14, 7}, {7, 7}, {13, 7}, {2, 2}}) {
    const ContractionPlan p = PlanContraction(depthwise(rows, 14));
    EXPECT_EQ(p.layout, Layout::kRowTiles) << rows;
    EXPECT_EQ(p.batch_rows, want) << rows << " rows";
  }
  // 56 rows of 16 fill flat tiles, whose innermost batch variable is the
  // channel: 32 of them, in blocks of 2 for a 4-vector tile.
  const ContractionPlan flat = PlanContraction(depthwise(56, 14));
  EXPECT_EQ(flat.layout, Layout::kFlatTiles);
  EXPECT_EQ(flat.inner_batch, 32);
  EXPECT_EQ(flat.tile.nv, 4);
  EXPECT_EQ(flat.batch_rows, 2);
  // 64 lanes: 4 vectors, so 2 or 3 rows; 7 blocks of 2 compute 14 rows, 5
  // blocks of 3 compute 15.
  const ContractionPlan wide = PlanContraction(depthwise(14, 62));
  EXPECT_EQ(wide.tile.nv, 4);
  EXPECT_EQ(wide.batch_rows, 2);
  EXPECT_THAT(wide.Summary(), ::testing::HasSubstr("(row tiles) (batch rows 2)"));
  // Rows of its own: a batched GEMM with M = 64 keeps one batch element per tile.
  ContractionShape gemm = Gemm(64, 256, 256);
  gemm.batch = 8;
  gemm.inner_batch = 8;
  EXPECT_GT(PlanContraction(gemm).tile.mr, 1);
  EXPECT_EQ(PlanContraction(gemm).batch_rows, 1);
}

// resnet18's 512-channel 3x3 conv on a 7x7 output: over padded rows the
// pixels fill 49 of 63 lanes and scatter; channel lanes put the 512 output
// channels on the lanes and the 49 pixels on the rows.
ContractionShape SmallPlaneConv(int64_t images) {
  ContractionShape s = Gemm(512, 7 * 9, 512 * 9);
  s.k_outer = 512;
  s.batch = images;
  s.flat_store_scatters = true;
  s.row_tiles_apply = true;
  s.n_inner = 9;
  s.channel_lanes_apply = true;
  s.lanes_joined = {true, 49 * images, 1};
  s.lanes_apart = {true, 49, images};
  s.conv_input_has_slack = true;
  s.conv_input_bytes = images * 512 * 9 * 9 * 4;
  return s;
}

// A 1x1 conv (output contiguous along the pixels, so flat tiles store whole
// runs): channel lanes for a 784-pixel, 512-channel output at batch 1 (1.6
// MB), flat tiles once the output passes lanes_store_cache_bytes (batch 8:
// 12.8 MB), where channel lanes' short runs per channel ran at memory
// latency.
TEST(ContractionPlanTest, LargePointwiseOutputsKeepFlatTiles) {
  auto pointwise = [](int64_t images) {
    ContractionShape s = Gemm(512, 784, 256);
    s.k_outer = 256;
    s.batch = images;
    s.inner_batch = images;
    s.channel_lanes_apply = true;
    s.lanes_joined = {true, 784 * images, 1};
    s.lanes_apart = {true, 784, images};
    return s;
  };
  EXPECT_EQ(PlanContraction(pointwise(1)).layout, Layout::kChannelLanes);
  EXPECT_EQ(PlanContraction(pointwise(8)).layout, Layout::kFlatTiles);
  ContractionKnobs big_cache;
  big_cache.lanes_store_cache_bytes = int64_t{64} << 20;
  EXPECT_EQ(PlanContraction(pointwise(8), big_cache).layout, Layout::kChannelLanes);
}

TEST(ContractionPlanTest, SmallPlanesTakeChannelLanes) {
  const ContractionPlan p = PlanContraction(SmallPlaneConv(1));
  ASSERT_EQ(p.layout, Layout::kChannelLanes);
  EXPECT_EQ(p.m, 49);   // pixels on the tile's rows
  EXPECT_EQ(p.n, 512);  // output channels on its lanes
  EXPECT_THAT(p.Summary(), ::testing::HasSubstr("(channel lanes)"));
  ContractionShape no_lanes = SmallPlaneConv(1);
  no_lanes.channel_lanes_apply = false;
  EXPECT_NE(PlanContraction(no_lanes).layout, Layout::kChannelLanes);
}

// Images stay apart where the padded input of all of them passes 1 MB and
// each has 256 pixels or more; then the lanes' batch is the images.
TEST(ContractionPlanTest, ImagesApartByTheirRule) {
  ContractionShape s = Gemm(64, 56 * 58, 64 * 9);
  s.k_outer = 64;
  s.batch = 8;
  s.flat_store_scatters = true;
  s.channel_lanes_apply = true;
  s.lanes_joined = {true, 8 * 56 * 56, 1};
  s.lanes_apart = {true, 56 * 56, 8};
  s.conv_input_has_slack = true;
  s.conv_input_bytes = 8 * 64 * 58 * 58 * 4;  // 6.9 MB
  // Flat tiles scatter at 24 cycles a vector and no row tiles apply, so
  // channel lanes (3 cycles a vector) win either way.
  const ContractionPlan apart = PlanContraction(s);
  ASSERT_EQ(apart.layout, Layout::kChannelLanes);
  EXPECT_TRUE(apart.images_apart);
  EXPECT_EQ(apart.batch, 8);
  EXPECT_EQ(apart.m, 56 * 56);
  s.conv_input_bytes = 1 << 20;  // not past 1 MB: the images join the pixels
  const ContractionPlan joined = PlanContraction(s);
  ASSERT_EQ(joined.layout, Layout::kChannelLanes);
  EXPECT_FALSE(joined.images_apart);
  EXPECT_EQ(joined.batch, 1);
  EXPECT_EQ(joined.m, 8 * 56 * 56);
}

// Channel lanes split the row blocks (pixels) into 4 or 2 parts of at
// least 2 blocks each: exactly where they divide, else with the last part
// redoing at most 1 tile in 32; 4 parts whenever 4 divide.
TEST(ContractionPlanTest, PixelPartsFollowTheRowBlocks) {
  int checked = 0;
  for (int64_t side : {7, 14, 28, 56}) {
    SCOPED_TRACE(side);
    // A 3x3 conv, 64 -> 128 channels, over padded rows of side + 2.
    ContractionShape s = SmallPlaneConv(1);
    s.m = 128;
    s.n = side * (side + 2);
    s.n_inner = side + 2;
    s.k = 64 * 9;  // a weight panel under 256 KB: no K blocks
    s.k_outer = 64;
    s.lanes_joined = s.lanes_apart = {true, side * side, 1};
    const ContractionPlan p = PlanContraction(s);
    if (p.layout != Layout::kChannelLanes) continue;
    ASSERT_EQ(p.loop_order, LoopOrder::kTilesInParallel);
    ++checked;
    const int64_t parts = p.pixel_parts, mb = p.mb;
    ASSERT_TRUE(parts == 1 || parts == 2 || parts == 4);
    if (mb % 4 == 0 && mb / 4 >= 2) {
      EXPECT_EQ(parts, 4);
    }
    if (parts > 1) {
      EXPECT_GE(mb / parts, 2);
      const int64_t redone = (mb + parts - 1) / parts * parts - mb;
      EXPECT_TRUE(mb % parts == 0 || redone * 32 <= mb);
    }
  }
  EXPECT_GE(checked, 2);  // the rule was exercised, not skipped
}

// A 1x1 conv over blocked channels, 1344 -> 112 channels on 14x14 pixels:
// forced to 3x112 its weight panel (602 KB) is past 256 KB, but one column
// block takes no K blocks; 3x64 (two column blocks, 344 KB) does. An
// override's K blocks still apply to one column block.
TEST(ContractionPlanTest, NoBlockedChannelKBlocksForOneColumnBlock) {
  ContractionShape s = Gemm(196, 112, 1344);
  s.k_outer = 84;  // channel blocks of 16
  s.channel_blocks = true;
  ScheduleOverride wide;
  wide.mr = 3;
  wide.nv = 7;
  std::string ignored;
  const ContractionPlan one = PlanContraction(s, {}, &wide, &ignored);
  EXPECT_EQ(ignored, "");
  EXPECT_EQ(one.nb, 1);
  EXPECT_TRUE(one.pixel_rows);
  EXPECT_EQ(one.k_block_span, 0);
  ScheduleOverride two = wide;
  two.nv = 4;
  const ContractionPlan blocked = PlanContraction(s, {}, &two, &ignored);
  EXPECT_EQ(ignored, "");
  EXPECT_EQ(blocked.nb, 2);
  EXPECT_GT(blocked.k_block_span, 0);
  wide.k_block_span = 4;
  EXPECT_EQ(PlanContraction(s, {}, &wide, &ignored).k_block_span, 4);
  EXPECT_EQ(ignored, "");
  // Eight vectors do not fit the registers: the override is ignored whole.
  ScheduleOverride too_wide;
  too_wide.mr = 1;
  too_wide.nv = 8;
  PlanContraction(s, {}, &too_wide, &ignored);
  EXPECT_THAT(ignored, ::testing::HasSubstr("does not fit the registers"));
}

TEST(ContractionPlanTest, OperandAccessRules) {
  ContractionPlan p = PlanContraction(Gemm(256, 256, 256));
  OperandFacts f;
  f.a_broadcastable = true;
  f.b_plain_activation_load = true;
  f.b_steps_by_one = true;
  ChooseOperandAccess(f, p);
  EXPECT_TRUE(p.a_in_place);
  EXPECT_EQ(p.b_in_place, p.nb * p.tile.nr() == 256);  // no overrun allowed: tiles must fit
  f.b_may_overrun = true;
  ChooseOperandAccess(f, p);
  EXPECT_TRUE(p.b_in_place);
  f.b_plain_activation_load = false;  // a constant: packed once at compile time instead
  ChooseOperandAccess(f, p);
  EXPECT_FALSE(p.b_in_place);
  // K blocks measured better with A packed.
  ContractionPlan blocked = PlanContraction(Gemm(3072, 3072, 4096));
  ASSERT_GT(blocked.k_block_span, 0);
  ChooseOperandAccess(f, blocked);
  EXPECT_FALSE(blocked.a_in_place);
}

// The analysis hands the plan a plain matmul's shape: the schedule lowering
// reports is the plan of M, N, K as written.
TEST(ContractionPlanTest, AnalysisReadsAMatmulsShape) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {96, 200}});
  Node* w = g.AddConstant("w", testing::FloatConstant({200, 144}, 0.5f));
  g.AddOutput(testing::Op(g, "matmul", {x, w}));
  absl::StatusOr<LoweredProgram> lowered = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->kernels.size(), 1u);
  EXPECT_EQ(lowered->kernels[0].schedule, PlanContraction(Gemm(96, 144, 200)).Summary());
}

}  // namespace
}  // namespace kiln::lower
