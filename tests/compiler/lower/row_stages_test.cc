// The loop nest RowStages (row_stages.cc) gives a group whose hoisted
// reductions are values of an output row: one nest over the rows, each row's
// values computed before its outputs, what two passes share computed once.
#include <string>

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

// The statements of a row: the first row value, stored into a temporary
// (the function's buffers past its params); a vectorised loop filling a
// row of local scratch with what the second value's pass and the output's
// pass share; the second value, reading that row; then a vectorised loop
// over the row storing the output, reading that row too.
void ExpectRowBody(const lower::LoopFunction& fn, const Stmt& row, int64_t row_length) {
  const std::string ir = lower::LoopFunctionToString(fn);
  ASSERT_EQ(row->kind, StmtKind::kSeq) << ir;
  ASSERT_EQ(row->children.size(), 4u) << ir;
  EXPECT_EQ(row->children[0]->kind, StmtKind::kStore) << ir;
  EXPECT_GE(row->children[0]->buffer, fn.num_params) << ir;
  const Stmt& fill = row->children[1];
  ASSERT_EQ(fill->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(fill->for_kind, ForKind::kVectorized) << ir;
  ASSERT_EQ(fill->children[0]->kind, StmtKind::kStore) << ir;
  const int scratch = fill->children[0]->buffer;
  ASSERT_GE(scratch, fn.num_params) << ir;
  EXPECT_TRUE(fn.buffers[scratch].local) << ir;
  EXPECT_EQ(fn.buffers[scratch].num_elements, row_length) << ir;
  ASSERT_EQ(row->children[2]->kind, StmtKind::kStore) << ir;
  EXPECT_GE(row->children[2]->buffer, fn.num_params) << ir;
  EXPECT_TRUE(lower::LoadsBuffer(row->children[2]->value, scratch)) << ir;
  const Stmt& out = row->children[3];
  ASSERT_EQ(out->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(out->for_kind, ForKind::kVectorized) << ir;
  EXPECT_EQ(out->var->extent, row_length) << ir;
  ASSERT_EQ(out->children[0]->kind, StmtKind::kStore) << ir;
  EXPECT_EQ(out->children[0]->buffer, fn.num_params - 1) << "the output\n" << ir;
  EXPECT_TRUE(lower::LoadsBuffer(out->children[0]->value, scratch)) << ir;
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
  ExpectRowBody(fn, fn.body->children[0], 256);
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
  ExpectRowBody(fn, query->children[0], 128);
}

// Instance norm of [2, 4, 6, 10] written out (mean and variance over the
// last two axes): the rows are the (n, c) planes, each plane's two values
// then its outputs in an (h, w) nest, w vectorised.
TEST(RowStagesTest, InstanceNormPlanesAreTheRows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 4, 6, 10}});
  const ReduceAttrs plane{{2, 3}, true};
  Node* centered = Op(g, "sub", {x, Op(g, "mean", {x}, plane)});
  Node* var = Op(g, "mean", {Op(g, "mul", {centered, centered})}, plane);
  Node* eps = g.AddConstant("eps", FloatConstant({}, 1e-5f));
  g.AddOutput(Op(g, "div", {centered, Op(g, "sqrt", {Op(g, "add", {var, eps})})}));
  const lower::LoopFunction fn = OneKernel(std::move(g));
  ASSERT_NE(fn.body, nullptr);
  const std::string ir = lower::LoopFunctionToString(fn);
  ASSERT_EQ(fn.body->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(fn.body->var->extent, 2);
  const Stmt& channel = fn.body->children[0];
  ASSERT_EQ(channel->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(channel->var->extent, 4);
  const Stmt& row = channel->children[0];
  ASSERT_EQ(row->kind, StmtKind::kSeq) << ir;
  ASSERT_EQ(row->children.size(), 3u) << ir;
  EXPECT_EQ(row->children[0]->kind, StmtKind::kStore) << ir;
  EXPECT_EQ(row->children[1]->kind, StmtKind::kStore) << ir;
  const Stmt& h = row->children[2];
  ASSERT_EQ(h->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(h->var->extent, 6);
  const Stmt& w = h->children[0];
  ASSERT_EQ(w->kind, StmtKind::kFor) << ir;
  EXPECT_EQ(w->for_kind, ForKind::kVectorized);
  EXPECT_EQ(w->var->extent, 10);
  ASSERT_EQ(w->children[0]->kind, StmtKind::kStore) << ir;
  EXPECT_EQ(w->children[0]->buffer, fn.num_params - 1) << ir;
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
