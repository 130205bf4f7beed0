#include "compiler/passes/row_independence.h"

#include "compiler/passes/infer_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::testing::HasSubstr;

absl::Status Check(Graph& g, int64_t rows) {
  absl::StatusOr<bool> typed = InferTypes(g);
  if (!typed.ok()) return typed.status();
  return CheckRowsIndependent(g, rows);
}

// conv -> relu -> pool -> flatten -> dense -> softmax over classes: every
// output row is its own image's.
TEST(RowIndependenceTest, AConvNetKeepsItsRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 3, 8, 8}});
  Node* w = g.AddConstant("w", FloatConstant({6, 3, 3, 3}, 0.5f));
  Conv2DAttrs conv;
  conv.padding = {1, 1, 1, 1};
  Node* c = Op(g, "relu", {Op(g, "conv2d", {x, w}, conv)});
  Pool2DAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  Node* p = Op(g, "max_pool2d", {c}, pool);
  Node* flat = Op(g, "reshape", {p}, ReshapeAttrs{{4, 96}});
  Node* fc = Op(g, "matmul", {flat, g.AddConstant("fc", FloatConstant({96, 10}, 0.1f))});
  Node* bias = Op(g, "add", {fc, g.AddConstant("b", FloatConstant({10}, 1.0f))});
  g.AddOutput(Op(g, "softmax", {bias}, AxisAttrs{-1}));
  EXPECT_TRUE(Check(g, 4).ok()) << Check(g, 4);
}

TEST(RowIndependenceTest, ReshapingRowsIntoDimZeroAndBackKeepsThem) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 5, 8}});
  Node* rows = Op(g, "reshape", {x}, ReshapeAttrs{{10, 8}});
  Node* y = Op(g, "matmul", {rows, g.AddConstant("w", FloatConstant({8, 8}, 0.25f))});
  g.AddOutput(Op(g, "reshape", {y}, ReshapeAttrs{{2, 5, 8}}));
  EXPECT_TRUE(Check(g, 2).ok()) << Check(g, 2);
}

// PyTorch's attention: the batch moves to dim 1 and back.
TEST(RowIndependenceTest, RowsMayMoveToAnotherDimAndBack) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5, 8}});
  Node* sbe = Op(g, "transpose", {x}, TransposeAttrs{{1, 0, 2}});
  Node* proj = Op(g, "matmul", {sbe, g.AddConstant("w", FloatConstant({8, 8}, 0.5f))});
  Node* heads = Op(g, "reshape", {proj}, ReshapeAttrs{{5, 6, 4}});  // [S, B * H, D / H]
  Node* bhs = Op(g, "transpose", {heads}, TransposeAttrs{{1, 0, 2}});
  Node* scores = Op(g, "softmax", {bhs}, AxisAttrs{-1});
  Node* back = Op(g, "reshape", {Op(g, "transpose", {scores}, TransposeAttrs{{1, 0, 2}})},
                  ReshapeAttrs{{5, 3, 8}});
  g.AddOutput(Op(g, "transpose", {back}, TransposeAttrs{{1, 0, 2}}));
  EXPECT_TRUE(Check(g, 3).ok()) << Check(g, 3);
}

// ... and merges it with the sequence for the output projection.
TEST(RowIndependenceTest, RowsMergedIntoAnotherDimStayRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5, 8}});
  Node* sbe = Op(g, "transpose", {x}, TransposeAttrs{{1, 0, 2}});
  Node* merged = Op(g, "reshape", {sbe}, ReshapeAttrs{{15, 8}});  // [S * B, E]
  Node* proj = Op(g, "matmul", {merged, g.AddConstant("w", FloatConstant({8, 8}, 0.5f))});
  Node* split = Op(g, "reshape", {proj}, ReshapeAttrs{{5, 3, 8}});
  g.AddOutput(Op(g, "transpose", {split}, TransposeAttrs{{1, 0, 2}}));
  EXPECT_TRUE(Check(g, 3).ok()) << Check(g, 3);
}

// A sum over [S * B] reads every row of every sequence position.
TEST(RowIndependenceTest, AReductionOverMergedRowsMixesThem) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5, 8}});
  Node* merged = Op(g, "reshape", {Op(g, "transpose", {x}, TransposeAttrs{{1, 0, 2}})},
                    ReshapeAttrs{{15, 8}});
  Node* total = Op(g, "sum", {merged}, ReduceAttrs{{0}, true});
  g.AddOutput(Op(g, "add", {x, total}));
  EXPECT_EQ(Check(g, 3).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RowIndependenceTest, RowsLeftOnAnotherDimAtTheOutputAreRefused) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5}});
  g.AddOutput(Op(g, "transpose", {x}, TransposeAttrs{{1, 0}}));
  EXPECT_EQ(Check(g, 3).code(), absl::StatusCode::kFailedPrecondition);
}

// A constant as tall as the batch gives each row its own values: a slice's
// rows, numbered from 0, would read the first rows' instead.
TEST(RowIndependenceTest, AConstantIndexedByTheRowIsRefused) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  std::vector<float> values(24);
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i);
  g.AddOutput(Op(g, "add", {x, g.AddConstant("per_row", FloatValues({4, 6}, values))}));
  const absl::Status s = Check(g, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("row's index"));
}

// ... but one value repeated (ConstantOfShape of the batch's shape, as
// PyTorch's attention builds its mask's zeros) is the same in every row.
TEST(RowIndependenceTest, AConstantOfOneValueAsTallAsTheBatchKeepsRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "add", {x, g.AddConstant("zeros", FloatConstant({4, 6}, 0.0f))}));
  EXPECT_TRUE(Check(g, 4).ok()) << Check(g, 4);
}

TEST(RowIndependenceTest, AReductionOverTheBatchMixesRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  Node* mean = Op(g, "sum", {x}, ReduceAttrs{{0}, true});
  g.AddOutput(Op(g, "sub", {x, mean}));
  const absl::Status s = Check(g, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("sum"));
}

TEST(RowIndependenceTest, ASoftmaxOverTheBatchAxisMixesRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "softmax", {x}, AxisAttrs{0}));
  EXPECT_EQ(Check(g, 4).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RowIndependenceTest, ATransposeMovingTheBatchMixesRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 4}});
  g.AddOutput(Op(g, "transpose", {x}, TransposeAttrs{{1, 0}}));
  const absl::Status s = Check(g, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("dim 0"));
}

TEST(RowIndependenceTest, AMatmulReducingOverTheBatchMixesRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 3}});
  // x^T x: the batch is the reduction.
  Node* xt = Op(g, "transpose", {x}, TransposeAttrs{{1, 0}});
  g.AddOutput(Op(g, "matmul", {xt, x}));
  EXPECT_EQ(Check(g, 4).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RowIndependenceTest, AReshapeMovingRowsOffDimZeroMixesThem) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "reshape", {x}, ReshapeAttrs{{6, 4}}));
  EXPECT_EQ(Check(g, 4).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RowIndependenceTest, AnOutputOfConstantsAloneIsNotARowOutput) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "relu", {x}));
  g.AddOutput(Op(g, "exp", {g.AddConstant("c", FloatConstant({4, 6}, 1.0f))}));
  const absl::Status s = Check(g, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("output"));
}

TEST(RowIndependenceTest, AnInputWithoutTheRowsOnDimZeroIsRefused) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  Node* m = g.AddInput("mask", {DType::kFloat32, {6}});
  g.AddOutput(Op(g, "mul", {x, m}));
  EXPECT_EQ(Check(g, 4).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kiln
