// FusePrologue decisions, checked through the kernels CompileGraph produces.
#include "compiler/passes/fuse_prologue.h"

#include <algorithm>

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::vector<std::vector<std::string>> KernelOps(Graph graph, CompileOptions options = {}) {
  options.nchwc_layout = NchwcLayout::kOff;
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(graph), options);
  EXPECT_TRUE(program.ok()) << program.status();
  std::vector<std::vector<std::string>> ops;
  if (!program.ok()) return ops;
  for (const KernelSpec& k : program->kernels) ops.push_back(k.ops);
  return ops;
}

Node* Conv1x1(Graph& g, Node* x, int64_t in, int64_t out) {
  Node* w =
      g.AddConstant("w" + std::to_string(g.num_nodes()), FloatConstant({out, in, 1, 1}, 0.1f));
  return Op(g, "conv2d", {x, w}, Conv2DAttrs{});
}

// A 3x3 conv with padding 1: its input goes through the padded copy.
Node* Conv3x3(Graph& g, Node* x, int64_t in, int64_t out) {
  Node* w =
      g.AddConstant("w" + std::to_string(g.num_nodes()), FloatConstant({out, in, 3, 3}, 0.1f));
  Conv2DAttrs same;
  same.padding = {1, 1, 1, 1};
  return Op(g, "conv2d", {x, w}, same);
}

// An SE block: x feeds the global pool and the channel scale, so the scale's
// mul cannot be x's epilogue; FusePrologue puts it in front of the 1x1 conv.
Graph SeBlock() {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 32, 8, 8}});
  Node* act = Op(g, "relu", {Conv1x1(g, x, 32, 32)});
  Node* pooled = Op(g, "mean", {act}, ReduceAttrs{{2, 3}, true});
  Node* s = Op(g, "sigmoid", {Conv1x1(g, pooled, 32, 32)});
  g.AddOutput(Conv1x1(g, Op(g, "mul", {act, s}), 32, 16));
  return g;
}

TEST(FusePrologueTest, SeChannelScaleJoinsTheConvThatReadsIt) {
  EXPECT_THAT(KernelOps(SeBlock()),
              ElementsAre(ElementsAre("conv2d", "relu"), ElementsAre("mean"),
                          ElementsAre("conv2d", "sigmoid"), ElementsAre("mul", "conv2d")));
}

TEST(FusePrologueTest, DisabledLeavesTheScaleAKernelOfItsOwn) {
  CompileOptions options;
  options.disabled_passes = {"FusePrologue"};
  EXPECT_THAT(
      KernelOps(SeBlock(), options),
      ElementsAre(ElementsAre("conv2d", "relu"), ElementsAre("mean"),
                  ElementsAre("conv2d", "sigmoid"), ElementsAre("mul"), ElementsAre("conv2d")));
}

// Pre-activation: BN (mul, add) and relu on a residual sum that the next
// block reads too, in front of a padded conv that already has an epilogue.
Graph PreActivation(int64_t kernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 16, 8, 8}});
  Node* y = g.AddInput("y", {DType::kFloat32, {1, 16, 8, 8}});
  Node* sum = Op(g, "add", {x, y});
  Node* bn = Op(g, "add",
                {Op(g, "mul", {sum, g.AddConstant("s", FloatConstant({1, 16, 1, 1}, 2))}),
                 g.AddConstant("t", FloatConstant({1, 16, 1, 1}, 1))});
  Node* w = g.AddConstant("w", FloatConstant({16, 16, kernel, kernel}, 0.1f));
  Conv2DAttrs same;
  const int64_t pad = kernel / 2;
  same.padding = {pad, pad, pad, pad};
  Node* conv = Op(g, "relu", {Op(g, "conv2d", {Op(g, "relu", {bn}), w}, same)});
  g.AddOutput(Op(g, "add", {conv, sum}));
  return g;
}

TEST(FusePrologueTest, PreActivationChainJoinsConvWithItsEpilogue) {
  EXPECT_THAT(
      KernelOps(PreActivation(3)),
      ElementsAre(ElementsAre("add"), ElementsAre("mul", "add", "relu", "conv2d", "relu", "add")));
}

// Into a 1x1 conv, read in place, BN + ReLU would run once per load: apart.
TEST(FusePrologueTest, PreActivationStaysApartFromPointwiseConv) {
  EXPECT_THAT(KernelOps(PreActivation(1)),
              ElementsAre(ElementsAre("add"), ElementsAre("mul", "add", "relu"),
                          ElementsAre("conv2d", "relu", "add")));
}

// Blocked, ConvertLayoutNchwc puts a layout_transform between the BN + ReLU
// and the conv2d_nchwc; the prologue reads through it.
TEST(FusePrologueTest, PreActivationJoinsBlockedConvThroughLayoutTransform) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 32, 8, 8}});
  Node* bn = Op(g, "add",
                {Op(g, "mul", {x, g.AddConstant("s", FloatConstant({1, 32, 1, 1}, 2))}),
                 g.AddConstant("t", FloatConstant({1, 32, 1, 1}, 1))});
  Node* w = g.AddConstant("w", FloatConstant({32, 32, 3, 3}, 0.1f));
  Conv2DAttrs same;
  same.padding = {1, 1, 1, 1};
  g.AddOutput(Op(g, "conv2d", {Op(g, "relu", {bn}), w}, same));
  CompileOptions options;
  options.nchwc_layout = NchwcLayout::kOn;
  options.disabled_passes = {"WinogradConv"};  // the direct conv; winograd_conv_test has its own
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(g), options);
  ASSERT_TRUE(program.ok()) << program.status();
  bool fused = false;
  for (const KernelSpec& k : program->kernels) {
    if (std::find(k.ops.begin(), k.ops.end(), "conv2d_nchwc") == k.ops.end()) continue;
    EXPECT_THAT(k.ops, ::testing::IsSupersetOf({"mul", "add", "relu", "layout_transform"}));
    fused = true;
  }
  EXPECT_TRUE(fused) << "no conv2d_nchwc kernel";
}

// A producer that reads two activations of its size stays a kernel: applied
// on the way into the conv, it would double what the conv reads.
TEST(FusePrologueTest, ProducerReadingTwoLargeTensorsStaysApart) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 16, 8, 8}});
  Node* y = g.AddInput("y", {DType::kFloat32, {1, 16, 8, 8}});
  g.AddOutput(Conv3x3(g, Op(g, "add", {x, y}), 16, 16));
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("add"), ElementsAre("conv2d")));
}

// A producer the conv reads as its weights is never a prologue.
TEST(FusePrologueTest, WeightProducerStaysApart) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 4, 8, 8}});
  Node* w = g.AddInput("w", {DType::kFloat32, {4, 4, 1, 1}});
  g.AddOutput(Op(g, "conv2d", {x, Op(g, "relu", {w})}, Conv2DAttrs{}));
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("relu"), ElementsAre("conv2d")));
}

// A producer with a second reader is not fused (it would be computed twice).
TEST(FusePrologueTest, ProducerWithTwoReadersStaysApart) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 16, 8, 8}});
  Node* r = Op(g, "relu", {x});
  g.AddOutput(Conv3x3(g, r, 16, 16));
  g.AddOutput(Op(g, "mean", {r}, ReduceAttrs{{2, 3}, true}));
  auto ops = KernelOps(std::move(g));
  EXPECT_THAT(
      ops, UnorderedElementsAre(ElementsAre("relu"), ElementsAre("conv2d"), ElementsAre("mean")));
}

}  // namespace
}  // namespace kiln
