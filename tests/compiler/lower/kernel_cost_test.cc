// A kernel's roofline counts (KernelSpec::flops, ::bytes) against hand-computed
// values: the conv and matmul formulas written out, not the registry's code.
#include <vector>

#include "compiler/driver/compile.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;

std::vector<KernelSpec> KernelsOf(Graph graph) {
  auto program = CompileGraph(std::move(graph), {});
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? program->kernels : std::vector<KernelSpec>{};
}

int64_t ArgBytes(const KernelSpec& k) {
  int64_t bytes = 0;
  for (const TensorType& t : k.arg_types) bytes += t.ByteSize();
  return bytes;
}

TEST(KernelCostTest, GroupedStridedConvWithReluEpilogue) {
  // x [N=2, C=8, 10, 10], weight [OC=16, C/groups=4, 3, 3], groups 2, stride 2,
  // pad 1: OH = OW = (10 + 2 - 3) / 2 + 1 = 5.
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 8, 10, 10}});
  Conv2DAttrs attrs;
  attrs.strides = {2, 2};
  attrs.padding = {1, 1, 1, 1};
  attrs.groups = 2;
  Node* conv = Op(g, "conv2d", {x, g.AddConstant("w", FloatConstant({16, 4, 3, 3}, 0.5f))}, attrs);
  g.AddOutput(Op(g, "relu", {conv}));
  const std::vector<KernelSpec> kernels = KernelsOf(std::move(g));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].ops, (std::vector<std::string>{"conv2d", "relu"}));
  const double conv_flops = 2.0 * 2 * 16 * 5 * 5 * (8 / 2) * 3 * 3;  // 2*N*OC*OH*OW*IC/g*KH*KW
  const double relu_flops = 2 * 16 * 5 * 5;                          // one per output element
  EXPECT_DOUBLE_EQ(kernels[0].flops, conv_flops + relu_flops);
  // Every arg once; packed weights may carry zero padding, so at least the
  // plain tensors' bytes.
  EXPECT_EQ(kernels[0].bytes, ArgBytes(kernels[0]));
  EXPECT_GE(kernels[0].bytes, 4 * (2 * 8 * 10 * 10 + 16 * 4 * 3 * 3 + 2 * 16 * 5 * 5));
}

TEST(KernelCostTest, BatchedMatmulWithBias) {
  // [3, 5, 7] x [7, 11] + bias [11]: M = 15 rows, K = 7, N = 11.
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5, 7}});
  g.AddOutput(Op(g, "matmul",
                 {x, g.AddConstant("w", FloatConstant({7, 11}, 0.25f)),
                  g.AddConstant("b", FloatConstant({11}, 1.0f))}));
  const std::vector<KernelSpec> kernels = KernelsOf(std::move(g));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(kernels[0].flops,
                   2.0 * 15 * 11 * 7 + 15 * 11);  // 2MNK + bias adds
  EXPECT_EQ(kernels[0].bytes, ArgBytes(kernels[0]));
  EXPECT_GE(kernels[0].bytes, 4 * (3 * 5 * 7 + 7 * 11 + 11 + 3 * 5 * 11));
}

TEST(KernelCostTest, ReductionCountsInputsAndReshapeNothing) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "sum", {x}, ReduceAttrs{{1}, false}));
  const std::vector<KernelSpec> kernels = KernelsOf(std::move(g));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(kernels[0].flops, 24);  // one add per input element
  EXPECT_EQ(kernels[0].bytes, 4 * (24 + 4));
}

}  // namespace
}  // namespace kiln
