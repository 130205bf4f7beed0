// WinogradConv: which blocked convs it rewrites, and its estimate on
// hand-computed shapes (the numbers are in each test).
#include "compiler/passes/winograd_conv.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;

// resnet18's layer1 conv: direct max(2*9*3136*64*64 / 64 / 0.92 = 3.93M,
// 147 KB / 16) cycles; Winograd max(2*36*196*64*64 / 64 / 0.85 = 1.06M,
// 590 KB / 16) + 100*196*4 + 80*196*4 = 1.20M <= 0.8 * 3.93M.
TEST(WinogradPaysOffTest, ResNetLayer1) { EXPECT_TRUE(WinogradPaysOff(4, 1, 64, 64, 56, 56)); }

// The same under F(2x2, 3x3): max(2*16*784*64*64 / 64 / 0.85 = 1.89M, 262 KB
// / 16) + (100*784*4 + 80*784*4) * 16/36 = 2.14M <= 0.8 * 3.93M.
TEST(WinogradPaysOffTest, ResNetLayer1TwoByTwo) {
  EXPECT_TRUE(WinogradPaysOff(2, 1, 64, 64, 56, 56));
}

// resnet18's layer4 conv: 36/9 x 9 MiB of weights is over the 16 MiB cap,
// at any batch; 16/9 x 9 MiB is the cap itself, and F(2x2) takes it
// (max(2.47M, 1.05M) cycles against 3.93M); layer3's 36/9 x 2.25 MiB is
// within.
TEST(WinogradPaysOffTest, WeightsOverTheCapStayDirect) {
  EXPECT_FALSE(WinogradPaysOff(4, 1, 512, 512, 7, 7));
  EXPECT_FALSE(WinogradPaysOff(4, 8, 512, 512, 7, 7));
  EXPECT_TRUE(WinogradPaysOff(2, 1, 512, 512, 7, 7));
  EXPECT_FALSE(WinogradPaysOff(2, 1, 512, 528, 7, 7));  // a block more: over
  EXPECT_TRUE(WinogradPaysOff(4, 8, 256, 256, 14, 14));
}

// One output pixel: direct max(2*9*256 / 64 / 0.92 = 78, 9216 / 16 = 576);
// F(4x4) max(339, 4*9216 / 16 = 2304) + 100 + 80 = 2484 > 0.8 * 576;
// F(2x2) max(151, 16/9*9216 / 16 = 1024) + 80 = 1104 > 461.
TEST(WinogradPaysOffTest, OnePixelStaysDirect) {
  EXPECT_FALSE(WinogradPaysOff(4, 1, 16, 16, 1, 1));
  EXPECT_FALSE(WinogradPaysOff(2, 1, 16, 16, 1, 1));
}

// A 1024x1024 image of 64 channels: V and M would take 16 * 512^2 * 128 * 4
// = 2 GiB under F(2x2), over the 64 MiB cap; at 128x128, 32 MiB is within.
TEST(WinogradPaysOffTest, WorkspaceOverTheCapStaysDirect) {
  EXPECT_FALSE(WinogradPaysOff(2, 1, 64, 64, 1024, 1024));
  EXPECT_TRUE(WinogradPaysOff(2, 1, 64, 64, 128, 128));
}

// The kernels' ops per conv kind: blocked 3x3 stride-1 convs become
// conv2d_nchwc_winograd_f2 (or _f4, as configured); strided, 1x1, dilated
// and grouped ones stay.
class WinogradConvRewriteTest : public ::testing::Test {
 protected:
  // x -> layout_transform -> conv2d_nchwc(attrs, window)
  // -> layout_transform back; the conv's op name after compiling.
  // x (1, channels, side, side), channels in and out.
  static std::string ConvOpAfter(const Conv2DAttrs& a, int64_t window, CompileOptions options = {},
                                 int64_t channels = 32, int64_t side = 16) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {1, channels, side, side}});
    Node* blocked = Op(g, "layout_transform", {x}, LayoutTransformAttrs{0, 16, 0});
    const int64_t groups = a.groups, blocks = channels / 16;
    Node* w = g.AddConstant(
        "w", FloatConstant({blocks, groups == 1 ? blocks : 1, window, window, 16, 16}, 0.01f));
    Node* conv = Op(g, "conv2d_nchwc", {blocked, w}, a);
    g.AddOutput(Op(g, "layout_transform", {conv}, LayoutTransformAttrs{16, 0, channels}));
    absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), options);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "";
    for (const KernelSpec& k : p->kernels) {
      for (const std::string& op : k.ops) {
        if (op.rfind("conv2d", 0) == 0) return op;
      }
    }
    return "none";
  }
  static Conv2DAttrs Padded() {
    Conv2DAttrs a;
    a.padding = {1, 1, 1, 1};
    return a;
  }
};

TEST_F(WinogradConvRewriteTest, ThreeByThreeStrideOne) {
  EXPECT_EQ(ConvOpAfter(Padded(), 3), "conv2d_nchwc_winograd_f2");
  Conv2DAttrs unpadded;
  EXPECT_EQ(ConvOpAfter(unpadded, 3), "conv2d_nchwc_winograd_f2");
  CompileOptions three, four;
  three.winograd_tile = 3;
  four.winograd_tile = 4;
  EXPECT_EQ(ConvOpAfter(Padded(), 3, three), "conv2d_nchwc_winograd_f3");
  EXPECT_EQ(ConvOpAfter(Padded(), 3, four), "conv2d_nchwc_winograd_f4");
}

// Where the chosen algorithm's transformed weights are over the cap, the
// conv takes the largest smaller one that fits: 512 channels in and out,
// 9 MiB of weights, F(4x4) 36 MiB and F(3x3) 25 MiB, F(2x2) 16 MiB.
TEST_F(WinogradConvRewriteTest, OverTheCapTakesASmallerAlgorithm) {
  EXPECT_FALSE(WinogradPaysOff(4, 1, 512, 512, 7, 7));
  EXPECT_FALSE(WinogradPaysOff(3, 1, 512, 512, 7, 7));
  EXPECT_TRUE(WinogradPaysOff(2, 1, 512, 512, 7, 7));
  CompileOptions four;
  four.winograd_tile = 4;
  EXPECT_EQ(ConvOpAfter(Padded(), 3, four, 512, 7), "conv2d_nchwc_winograd_f2");
}

TEST_F(WinogradConvRewriteTest, OtherConvsStayDirect) {
  Conv2DAttrs strided = Padded();
  strided.strides = {2, 2};
  EXPECT_EQ(ConvOpAfter(strided, 3), "conv2d_nchwc");
  EXPECT_EQ(ConvOpAfter(Conv2DAttrs{}, 1), "conv2d_nchwc");
  Conv2DAttrs dilated;
  dilated.padding = {2, 2, 2, 2};
  dilated.dilation = {2, 2};
  EXPECT_EQ(ConvOpAfter(dilated, 3), "conv2d_nchwc");
  Conv2DAttrs grouped = Padded();
  grouped.groups = 2;  // one group per block
  EXPECT_EQ(ConvOpAfter(grouped, 3), "conv2d_nchwc");
  EXPECT_EQ(ConvOpAfter(Padded(), 5), "conv2d_nchwc");
}

TEST_F(WinogradConvRewriteTest, DisabledOrBelowItsOptLevelKeepsTheConv) {
  CompileOptions disabled;
  disabled.disabled_passes = {"WinogradConv"};
  EXPECT_EQ(ConvOpAfter(Padded(), 3, disabled), "conv2d_nchwc");
  CompileOptions level1;
  level1.opt_level = 1;
  EXPECT_EQ(ConvOpAfter(Padded(), 3, level1), "conv2d_nchwc");
  CompileOptions none;
  none.winograd_tile = 0;
  EXPECT_EQ(ConvOpAfter(Padded(), 3, none), "conv2d_nchwc");
}

TEST(WinogradConvOptionsTest, OtherTilesAreInvalid) {
  Graph g;
  g.AddOutput(Op(g, "relu", {g.AddInput("x", {DType::kFloat32, {4}})}));
  CompileOptions five;
  five.winograd_tile = 5;
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), five);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
}

// The op's relation refuses what its lowering does not handle.
TEST(WinogradConvOpTest, RelationRefusesAStridedConv) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 2, 8, 8, 16}});
  Conv2DAttrs strided;
  strided.strides = {2, 2};
  Node* conv = Op(g, "conv2d_nchwc_winograd_f4",
                  {x, g.AddConstant("w", FloatConstant({2, 2, 3, 3, 16, 16}, 0.01f))}, strided);
  g.AddOutput(conv);
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_THAT(std::string(p.status().message()), ::testing::HasSubstr("stride and dilation 1"));
}

}  // namespace
}  // namespace kiln
