// The loop nest lower_group.cc's RowStages gives a group whose hoisted
// reductions are values of an output row: one nest over the rows, each row's
// values computed before its outputs.
#include "compiler/driver/compile.h"
#include "compiler/lower/loop_ir.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;
using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;

// The one kernel `g` compiles to.
lower::LoopFunction OneKernel(Graph g) {
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(g), {});
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  EXPECT_EQ(program->kernels.size(), 1u);
  if (program->kernels.size() != 1) return {};
  return program->kernels[0].function;
}

// The statements of a row: `num_values` stores into temporaries (the
// function's buffers past its params), then a vectorised loop over the row
// storing the output.
void ExpectRowBody(const lower::LoopFunction& fn, const Stmt& row, size_t num_values,
                   int64_t row_length) {
  ASSERT_EQ(row->kind, StmtKind::kSeq) << lower::LoopFunctionToString(fn);
  ASSERT_EQ(row->children.size(), num_values + 1) << lower::LoopFunctionToString(fn);
  for (size_t i = 0; i < num_values; ++i) {
    EXPECT_EQ(row->children[i]->kind, StmtKind::kStore);
    EXPECT_GE(row->children[i]->buffer, fn.num_params) << "a temporary";
  }
  const Stmt& out = row->children.back();
  ASSERT_EQ(out->kind, StmtKind::kFor);
  EXPECT_EQ(out->for_kind, ForKind::kVectorized);
  EXPECT_EQ(out->var->extent, row_length);
  ASSERT_EQ(out->children[0]->kind, StmtKind::kStore);
  EXPECT_EQ(out->children[0]->buffer, fn.num_params - 1) << "the output";
}

// add, then LayerNorm over the last axis of [128, 256] (the transformer's).
TEST(RowStagesTest, LayerNormRowsRunInOneParallelLoop) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {128, 256}});
  Node* r = g.AddInput("r", {DType::kFloat32, {128, 256}});
  Node* v = Op(g, "add", {x, r});
  const ReduceAttrs row{{-1}, true};
  Node* centered = Op(g, "sub", {v, Op(g, "mean", {v}, row)});
  Node* var = Op(g, "mean", {Op(g, "mul", {centered, centered})}, row);
  Node* eps = g.AddConstant("eps", FloatConstant({}, 1e-5f));
  Node* normed = Op(g, "div", {centered, Op(g, "sqrt", {Op(g, "add", {var, eps})})});
  g.AddOutput(Op(g, "mul", {normed, g.AddConstant("scale", FloatConstant({256}, 2))}));
  const lower::LoopFunction fn = OneKernel(std::move(g));
  ASSERT_NE(fn.body, nullptr);
  ASSERT_EQ(fn.body->kind, StmtKind::kFor) << lower::LoopFunctionToString(fn);
  EXPECT_EQ(fn.body->for_kind, ForKind::kParallel);
  EXPECT_EQ(fn.body->var->extent, 128);
  ExpectRowBody(fn, fn.body->children[0], 2, 256);
}

// softmax over the last axis of [4, 128, 128] (attention's scores): rows
// are (head, query) pairs, the heads' loop parallel.
TEST(RowStagesTest, SoftmaxRowsNestUnderTheHeadLoop) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 128, 128}});
  g.AddOutput(Op(g, "softmax", {x}, AxisAttrs{-1}));
  const lower::LoopFunction fn = OneKernel(std::move(g));
  ASSERT_NE(fn.body, nullptr);
  ASSERT_EQ(fn.body->kind, StmtKind::kFor) << lower::LoopFunctionToString(fn);
  EXPECT_EQ(fn.body->for_kind, ForKind::kParallel);
  EXPECT_EQ(fn.body->var->extent, 4);
  const Stmt& query = fn.body->children[0];
  ASSERT_EQ(query->kind, StmtKind::kFor);
  EXPECT_EQ(query->for_kind, ForKind::kSerial);
  EXPECT_EQ(query->var->extent, 128);
  ExpectRowBody(fn, query->children[0], 2, 128);
}

// softmax over the middle axis: its values are per (n, w), not per row of
// the innermost loop, so the stages stay separate nests.
TEST(RowStagesTest, SoftmaxOverAMiddleAxisKeepsSeparateStages) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 8, 16}});
  g.AddOutput(Op(g, "softmax", {x}, AxisAttrs{1}));
  const lower::LoopFunction fn = OneKernel(std::move(g));
  ASSERT_NE(fn.body, nullptr);
  ASSERT_EQ(fn.body->kind, StmtKind::kSeq) << lower::LoopFunctionToString(fn);
  EXPECT_EQ(fn.body->children.size(), 3u);
}

}  // namespace
}  // namespace kiln
