// The loop IR's call statement: what the generic walks (MapExprs,
// StmtLoadsBuffer, SameStmt, printing) see of it, since passes rewrite
// bodies holding calls (a conv's padded-input copy) through them.
#include "compiler/lower/loop_ir.h"

#include <string>

#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::lower {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LoopIrCallTest : public ::testing::Test {
 protected:
  // for r in [0, 8): fill(&b1[r * 16], &b0[r * 4], 4, r)
  Stmt CallInLoop(const te::Var& r, int64_t scale) {
    return MakeFor(r, ForKind::kParallel,
                   MakeCall("fill", {{1, b_.Mul(b_.Ref(r), b_.Int(16))},
                                     {0, b_.Mul(b_.Ref(r), b_.Int(scale))},
                                     {-1, b_.Int(4)},
                                     {-1, b_.Ref(r)}}));
  }
  te::ExprBuilder b_;
};

TEST_F(LoopIrCallTest, ACallReadsTheBuffersItIsGiven) {
  te::Var r = b_.NewVar("r", 8);
  Stmt s = CallInLoop(r, 4);
  EXPECT_TRUE(StmtLoadsBuffer(s, 0));
  EXPECT_TRUE(StmtLoadsBuffer(s, 1));
  EXPECT_FALSE(StmtLoadsBuffer(s, 2));
}

TEST_F(LoopIrCallTest, MapExprsRewritesEveryArgument) {
  te::Var r = b_.NewVar("r", 8);
  Stmt s = CallInLoop(r, 4);
  Stmt fixed = MapExprs(s->children[0], [&](const te::Expr& e) {
    return e ? b_.Substitute(e, {r}, {b_.Int(3)}) : e;
  });
  ASSERT_EQ(fixed->kind, StmtKind::kCall);
  ASSERT_EQ(fixed->args.size(), 4u);
  EXPECT_EQ(fixed->callee, "fill");
  EXPECT_EQ(fixed->args[0].buffer, 1);
  EXPECT_EQ(fixed->args[1].buffer, 0);
  EXPECT_EQ(fixed->args[2].buffer, -1);
  EXPECT_EQ(te::ExprToString(fixed->args[3].value), "3");
  for (const CallArg& a : fixed->args) EXPECT_THAT(te::ExprToString(a.value), Not(HasSubstr("r")));
}

TEST_F(LoopIrCallTest, SameStmtComparesCalleeAndArguments) {
  te::Var r = b_.NewVar("r", 8);
  EXPECT_TRUE(SameStmt(CallInLoop(r, 4), CallInLoop(r, 4)));
  EXPECT_FALSE(SameStmt(CallInLoop(r, 4), CallInLoop(r, 5)));
  Stmt other =
      MakeFor(r, ForKind::kParallel, MakeCall("zero", CallInLoop(r, 4)->children[0]->args));
  EXPECT_FALSE(SameStmt(CallInLoop(r, 4), other));
}

TEST_F(LoopIrCallTest, PrintsCalleeWithAddressesAndValues) {
  te::Var r = b_.NewVar("r", 8);
  LoopFunction fn{"k",
                  {{"in", te::ScalarType::kF32, 32}, {"out", te::ScalarType::kF32, 128}},
                  2,
                  CallInLoop(r, 4)};
  const std::string text = LoopFunctionToString(fn);
  EXPECT_THAT(text, HasSubstr("fill(&b1["));
  EXPECT_THAT(text, HasSubstr("], &b0["));
  EXPECT_THAT(text, HasSubstr(", 4, r"));
}

// A DAG prints each shared node once per use: x + x nested 60 deep would be
// 2^60 leaves long. Printing stops at the limit with "..." (and in time).
// The workspace a kernel takes while it runs: its temporaries in their
// stored element types, not its params nor its thread-local (stack) ones.
TEST(TemporaryBytesTest, CountsPooledTemporariesAsStored) {
  LoopFunction fn;
  fn.buffers = {{"in", te::ScalarType::kF32, 1000},
                {"out", te::ScalarType::kF32, 1000},
                {"padded", te::ScalarType::kF32, 100},
                {"acc", te::ScalarType::kF32, 256, /*local=*/true},
                {"narrow_panel", te::ScalarType::kF32, 64, false, DType::kInt8},
                {"rows", te::ScalarType::kI64, 10}};
  fn.num_params = 2;
  EXPECT_EQ(TemporaryBytes(fn), 100 * 4 + 64 * 1 + 10 * 8);
  fn.num_params = 6;
  EXPECT_EQ(TemporaryBytes(fn), 0);
}

TEST(ExprToStringTest, DeepSharedDagIsCutAtTheLimit) {
  te::ExprBuilder b;
  te::Var x = b.NewVar("x", 4);
  te::Expr e = b.Ref(x);
  for (int i = 0; i < 60; ++i) e = b.Add(e, e);
  const std::string text = te::ExprToString(e);
  EXPECT_LE(text.size(), te::kExprPrintLimit + 3);
  EXPECT_GE(text.size(), te::kExprPrintLimit);
  EXPECT_THAT(text, ::testing::EndsWith("..."));
  EXPECT_EQ(te::ExprToString(b.Add(b.Ref(x), b.Int(1))), "(x + 1)");
  EXPECT_EQ(te::ExprToString(e, 10).substr(0, 10), "((((((((((");
}

}  // namespace
}  // namespace kiln::lower
