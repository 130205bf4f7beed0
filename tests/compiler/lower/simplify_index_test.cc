// SimplifyIndex against the unsimplified expression, evaluated at every point
// of its variables' ranges, and the shapes it should reach.
#include "compiler/lower/simplify_index.h"

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util/index_values.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::Var;

bool HasDivOrMod(const Expr& e) {
  if (e->kind == te::ExprKind::kBinary &&
      (e->binary_op() == te::BinaryOp::kDiv || e->binary_op() == te::BinaryOp::kMod)) {
    return true;
  }
  for (const Expr& o : e->operands) {
    if (HasDivOrMod(o)) return true;
  }
  return false;
}

std::vector<int64_t> Values(const Expr& e, const std::vector<Var>& vars) {
  return ::kiln::testing::IndexValues(e, vars);
}

TEST(SimplifyIndexTest, ReshapeSplitOfAFlatIndexBecomesTheDigit) {
  te::ExprBuilder b;
  Var m = b.NewVar("m", 128), k = b.NewVar("k", 256);
  Expr flat = b.Add(b.Mul(b.Ref(m), b.Int(256)), b.Ref(k));
  Expr head = b.Mod(b.Div(flat, b.Int(64)), b.Int(4));
  Expr simple = SimplifyIndex(b, head);
  EXPECT_EQ(simple, b.Div(b.Ref(k), b.Int(64)));
  EXPECT_EQ(Values(simple, {m, k}), Values(head, {m, k}));
  // The row: m * 4 + k / 64 over 64.
  Expr row = b.Div(flat, b.Int(64));
  EXPECT_EQ(Values(SimplifyIndex(b, row), {m, k}), Values(row, {m, k}));
  EXPECT_EQ(SimplifyIndex(b, b.Mod(flat, b.Int(64))), b.Mod(b.Ref(k), b.Int(64)));
}

TEST(SimplifyIndexTest, MayBeNegativeNumeratorIsLeftAlone) {
  te::ExprBuilder b;
  Var i = b.NewVar("i", 10);
  Expr e = b.Div(b.Sub(b.Ref(i), b.Int(3)), b.Int(2));  // -3 / 2 truncates to -1
  EXPECT_EQ(SimplifyIndex(b, e), e);
}

TEST(SimplifyIndexTest, ClampedRowWithAConstantOffset) {
  te::ExprBuilder b;
  Var r = b.NewVar("r", 6), ib = b.NewVar("ib", 22), k = b.NewVar("k", 256);
  Expr row = b.Min(b.Add(b.Mul(b.Ref(ib), b.Int(6)), b.Ref(r)), b.Int(127));
  Expr flat = b.Add(b.Add(b.Mul(row, b.Int(256)), b.Ref(k)), b.Int(70));
  Expr e = b.Add(b.Mul(b.Div(flat, b.Int(64)), b.Int(1000)), b.Mod(flat, b.Int(64)));
  Expr simple = SimplifyIndex(b, e);
  EXPECT_EQ(Values(simple, {r, ib, k}), Values(e, {r, ib, k}));
}

// Random sums of variables with random coefficients, divided and reduced by
// random constants, nested: every simplification must keep every value.
TEST(SimplifyIndexTest, RandomNestedDivisionsKeepTheirValues) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    te::ExprBuilder b;
    std::vector<Var> vars = {b.NewVar("a", pick(1, 9)), b.NewVar("b", pick(1, 9)),
                             b.NewVar("c", pick(1, 9))};
    std::function<Expr(int)> random_expr = [&](int depth) -> Expr {
      Expr sum = b.Int(pick(0, 20));
      for (const Var& v : vars) {
        if (pick(0, 2) > 0) sum = b.Add(sum, b.Mul(b.Ref(v), b.Int(pick(1, 12))));
      }
      if (depth > 0 && pick(0, 1) == 1)
        sum = b.Add(sum, b.Mul(random_expr(depth - 1), b.Int(pick(1, 4))));
      const Expr divisor = b.Int(pick(1, 16));
      return pick(0, 1) == 0 ? b.Div(sum, divisor) : b.Mod(sum, divisor);
    };
    Expr e = random_expr(2);
    SCOPED_TRACE(trial);
    ASSERT_EQ(Values(SimplifyIndex(b, e), vars), Values(e, vars));
  }
}

TEST(SimplifyIndexTest, StatementsAreSimplifiedEverywhere) {
  te::ExprBuilder b;
  Var m = b.NewVar("m", 8), k = b.NewVar("k", 32);
  Expr flat = b.Add(b.Mul(b.Ref(m), b.Int(32)), b.Ref(k));
  Stmt s = MakeFor(m, ForKind::kSerial,
                   MakeFor(k, ForKind::kVectorized,
                           MakeStore(0, b.Mod(flat, b.Int(32)),
                                     b.Load(1, te::ScalarType::kF32, {b.Div(flat, b.Int(32))}))));
  Stmt out = SimplifyIndices(b, s);
  const Stmt& store = out->children[0]->children[0];
  EXPECT_FALSE(HasDivOrMod(store->index));
  EXPECT_FALSE(HasDivOrMod(store->value));
}

}  // namespace
}  // namespace kiln::lower
