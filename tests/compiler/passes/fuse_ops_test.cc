// FuseOps decisions, checked through the kernels CompileGraph produces.
#include "compiler/passes/fuse_ops.h"

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;
using ::testing::ElementsAre;

std::vector<std::vector<std::string>> KernelOps(Graph graph, CompileOptions options = {}) {
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(graph), options);
  EXPECT_TRUE(program.ok()) << program.status();
  std::vector<std::vector<std::string>> ops;
  if (!program.ok()) return ops;
  for (const KernelSpec& k : program->kernels) ops.push_back(k.ops);
  return ops;
}

// A 3x3 conv2d from `channels` to `channels` (op types are not inferred yet).
Node* Conv(Graph& g, Node* x, int64_t channels) {
  Node* w = g.AddConstant("w" + std::to_string(g.num_nodes()),
                          FloatConstant({channels, channels, 3, 3}, 0.1f));
  return Op(g, "conv2d", {x, w}, Conv2DAttrs{});
}

TEST(FuseOpsTest, DiamondOfElementwiseBranchesFusesIntoOneKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 4, 8, 8}});
  Node* c = Conv(g, x, 4);
  Node* a = Op(g, "relu", {c});
  Node* b = Op(g, "tanh", {c});
  Node* d = Op(g, "exp", {c});
  g.AddOutput(Op(g, "add", {Op(g, "add", {a, b}), d}));
  auto ops = KernelOps(std::move(g));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].front(), "conv2d");
  EXPECT_EQ(ops[0].size(), 6u);
}

TEST(FuseOpsTest, TwoConvReluPairsStayTwoKernels) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 4, 10, 10}});
  Node* r1 = Op(g, "relu", {Conv(g, x, 4)});
  Node* r2 = Op(g, "relu", {Conv(g, r1, 4)});
  g.AddOutput(r2);
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("conv2d", "relu"), ElementsAre("conv2d", "relu")));
}

Graph AddChain(int length) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 8}});
  Node* c = g.AddConstant("c", FloatConstant({2, 8}, 1.0f));
  Node* v = x;
  for (int i = 0; i < length; ++i) v = Op(g, "add", {v, c});
  g.AddOutput(v);
  return g;
}

TEST(FuseOpsTest, ChainLongerThanMaxDepthSplits) {
  auto ops = KernelOps(AddChain(300));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].size() + ops[1].size(), 300u);
  EXPECT_LE(ops[0].size(), 256u);
  EXPECT_LE(ops[1].size(), 256u);
}

TEST(FuseOpsTest, LargerMaxDepthFusesWholeChain) {
  CompileOptions options;
  options.max_fuse_depth = 1000;
  auto ops = KernelOps(AddChain(300), options);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].size(), 300u);
}

TEST(FuseOpsTest, ElementwiseProducerFusesIntoReduction) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 16}});
  Node* e = Op(g, "exp", {x});
  Node* s = Op(g, "sum", {e}, ReduceAttrs{{-1}, true});
  g.AddOutput(s);
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("exp", "sum")));
}

// TVM makes three kernels of this (exp, sum, divide): exp has two consumers and
// the path through the reduction fails CheckPath. Kiln fuses the reduction into
// its elementwise epilogue first, so all three share one kernel and the exp
// tensor is never written to memory (see the design note in fuse_ops.cc).
TEST(FuseOpsTest, ExpSumDivideFusesIntoOneKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 16}});
  Node* e = Op(g, "exp", {x});
  Node* s = Op(g, "sum", {e}, ReduceAttrs{{-1}, true});
  g.AddOutput(Op(g, "div", {e, s}));
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("exp", "sum", "div")));
}

TEST(FuseOpsTest, DenseNeverJoinsAReductionGroup) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 16}});
  Node* w = g.AddConstant("w", FloatConstant({8, 16}, 0.5f));
  Node* d = Op(g, "dense", {x, w});
  Node* s = Op(g, "sum", {d}, ReduceAttrs{{-1}, true});
  g.AddOutput(Op(g, "div", {d, s}));
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("dense"), ElementsAre("sum", "div")));
}

// LayerNorm over `axes` of `v`, as the ONNX importer writes it out: mean,
// sub, mul (the square), mean, add eps, sqrt, div, mul scale, add bias
// (scale and bias of shape `affine`).
Node* LayerNorm(Graph& g, Node* v, const ReduceAttrs& axes, std::vector<int64_t> affine) {
  Node* centered = Op(g, "sub", {v, Op(g, "mean", {v}, axes)});
  Node* var = Op(g, "mean", {Op(g, "mul", {centered, centered})}, axes);
  Node* eps = g.AddConstant("eps" + std::to_string(g.num_nodes()), FloatConstant({}, 1e-5f));
  Node* std_dev = Op(g, "sqrt", {Op(g, "add", {var, eps})});
  Node* scale = g.AddConstant("scale" + std::to_string(g.num_nodes()), FloatConstant(affine, 2));
  Node* bias = g.AddConstant("bias" + std::to_string(g.num_nodes()), FloatConstant(affine, 1));
  return Op(g, "add", {Op(g, "mul", {Op(g, "div", {centered, std_dev}), scale}), bias});
}

// TVM stops at each reduction: mean+sub, then the variance and the rest.
// Kiln's row pair (fuse_ops.cc) makes the LayerNorm and the residual add
// feeding it one group: both reductions reduce the same axis of [4, 96].
TEST(FuseOpsTest, LayerNormWithItsResidualAddIsOneKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 96}});
  Node* r = g.AddInput("r", {DType::kFloat32, {4, 96}});
  g.AddOutput(LayerNorm(g, Op(g, "add", {x, r}), ReduceAttrs{{-1}, true}, {96}));
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("add", "mean", "sub", "mul", "mean", "add", "sqrt", "div",
                                      "mul", "add")));
}

// A LayerNorm over columns (axis 0 of [4, 96]) feeding one over rows: the
// second's reductions read other rows than the first's, so the pair rule
// leaves them two kernels.
TEST(FuseOpsTest, LayerNormKernelIsNamedAfterAllItsOps) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 96}});
  Node* r = g.AddInput("r", {DType::kFloat32, {4, 96}});
  g.AddOutput(LayerNorm(g, Op(g, "add", {x, r}), ReduceAttrs{{-1}, true}, {96}));
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(g), {});
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->kernels.size(), 1u);
  EXPECT_EQ(program->kernels[0].name, "fused_add_mean_sub_mul_mean_add_sqrt_div_mul_add_0");
}

TEST(FuseOpsTest, LayerNormsOverDifferentAxesAreTwoKernels) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 96}});
  Node* columns = LayerNorm(g, x, ReduceAttrs{{0}, true}, {4, 1});
  g.AddOutput(LayerNorm(g, columns, ReduceAttrs{{-1}, true}, {96}));
  auto ops = KernelOps(std::move(g));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].size(), 9u);
  EXPECT_EQ(ops[1].size(), 9u);
}

// Softmax written out: max, sub, exp, then the sum of exps over the same row.
TEST(FuseOpsTest, SoftmaxWrittenOutIsOneKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 16}});
  Node* e = Op(g, "exp", {Op(g, "sub", {x, Op(g, "max", {x}, ReduceAttrs{{-1}, true})})});
  g.AddOutput(Op(g, "div", {e, Op(g, "sum", {e}, ReduceAttrs{{-1}, true})}));
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("max", "sub", "exp", "sum", "div")));
}

// The second reduction sums columns, not rows: the pair rule does not apply
// and the first group stops where TVM's would.
TEST(FuseOpsTest, ReductionsOverDifferentAxesStayApart) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 16}});
  Node* centered = Op(g, "sub", {x, Op(g, "mean", {x}, ReduceAttrs{{-1}, true})});
  Node* cols = Op(g, "sum", {Op(g, "mul", {centered, centered})}, ReduceAttrs{{0}, true});
  g.AddOutput(Op(g, "div", {centered, cols}));
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("mean", "sub"), ElementsAre("mul", "sum", "div")));
}

// Kiln beyond TVM: an injective chain whose every path ends in a dense or
// matmul becomes part of that op's operand (attention's head split), while
// a conv2d keeps its producers apart.
TEST(FuseOpsTest, TransposeReshapeChainFusesIntoMatmulOperand) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {8, 2, 16}});
  Node* t = Op(g, "transpose", {x}, TransposeAttrs{{1, 0, 2}});
  Node* r = Op(g, "reshape", {t}, ReshapeAttrs{{16, 16}});
  Node* w = g.AddConstant("w", FloatConstant({16, 4}, 0.5f));
  g.AddOutput(Op(g, "relu", {Op(g, "matmul", {r, w})}));
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("transpose", "reshape", "matmul", "relu")));
}

TEST(FuseOpsTest, TransposeBeforeConvStaysApart) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 10, 10, 4}});
  Node* t = Op(g, "transpose", {x}, TransposeAttrs{{0, 3, 1, 2}});
  g.AddOutput(Conv(g, t, 4));
  EXPECT_THAT(KernelOps(std::move(g)),
              ElementsAre(ElementsAre("transpose"), ElementsAre("conv2d")));
}

TEST(FuseOpsTest, GraphOutputIsNeverFusedAway) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4}});
  Node* a = Op(g, "exp", {x});
  Node* b = Op(g, "relu", {a});
  g.AddOutput(a);
  g.AddOutput(b);
  EXPECT_THAT(KernelOps(std::move(g)), ElementsAre(ElementsAre("exp"), ElementsAre("relu")));
}

TEST(FuseOpsTest, DisabledFuseOpsLeavesEveryOpAlone) {
  CompileOptions options;
  options.disabled_passes = {"FuseOps"};
  EXPECT_EQ(KernelOps(AddChain(5), options).size(), 5u);
}

}  // namespace
}  // namespace kiln
