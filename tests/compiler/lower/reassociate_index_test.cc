// ReassociateIndices against the index it rewrites, evaluated at every point
// of its loops, and the order of the terms it should reach: the last addend
// is the innermost loop's, so everything before it is loop-invariant there.
#include "compiler/lower/reassociate_index.h"

#include <cstdint>
#include <vector>

#include "compiler/lower/linear_form.h"
#include "compiler/te/expr_builder.h"
#include "gtest/gtest.h"
#include "tests/test_util/index_values.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::Var;

std::vector<int64_t> Values(const Expr& e, const std::vector<Var>& vars) {
  return ::kiln::testing::IndexValues(e, vars);
}

// The index of the store at the bottom of a chain of single-child loops.
Expr StoreIndex(const Stmt& s) {
  return s->kind == StmtKind::kStore ? s->index : StoreIndex(s->children[0]);
}

// The addends of a left-leaning sum ((a + b) + c), first to last.
std::vector<Expr> Addends(const Expr& e) {
  if (e->kind != te::ExprKind::kBinary || e->binary_op() != te::BinaryOp::kAdd) return {e};
  std::vector<Expr> out = Addends(e->operands[0]);
  out.push_back(e->operands[1]);
  return out;
}

// A stride-2 conv's phase-split read in Horner form: tile row oh (outer),
// kernel row kh, kernel column kw (inner). oh + kh / 2 sits under the row
// multiply, so the form mixes all three loops.
TEST(ReassociateIndexTest, StridedConvReadIsGroupedFromOuterToInnerLoop) {
  te::ExprBuilder b;
  Var oh = b.NewVar("oh", 7), kh = b.NewVar("kh", 3), kw = b.NewVar("kw", 3);
  Expr phase = b.Add(b.Mul(b.Mod(b.Ref(kh), b.Int(2)), b.Int(2)), b.Mod(b.Ref(kw), b.Int(2)));
  Expr row = b.Add(b.Ref(oh), b.Div(b.Ref(kh), b.Int(2)));
  Expr horner = b.Add(b.Mul(b.Add(b.Mul(phase, b.Int(8)), row), b.Int(8)),
                      b.Add(b.Div(b.Ref(kw), b.Int(2)), b.Int(1)));
  Stmt nest = MakeFor(oh, ForKind::kSerial,
                      MakeFor(kh, ForKind::kSerial,
                              MakeFor(kw, ForKind::kSerial, MakeStore(0, horner, b.Float(0)))));
  Expr regrouped = StoreIndex(ReassociateIndices(nest));
  EXPECT_EQ(Values(regrouped, {oh, kh, kw}), Values(horner, {oh, kh, kw}));

  // constant + oh's term, then kh's two, then kw's two: each prefix is
  // invariant in the loops inside it.
  std::vector<Expr> addends = Addends(regrouped);
  ASSERT_EQ(addends.size(), 6u);
  auto only = [&](const Expr& e, const Var& v) {
    for (const Var& other : {oh, kh, kw}) {
      if (DependsOn(e, other.get()) != (other == v)) return false;
    }
    return true;
  };
  EXPECT_TRUE(addends[0]->kind == te::ExprKind::kIntImm);
  EXPECT_TRUE(only(addends[1], oh));
  EXPECT_TRUE(only(addends[2], kh) && only(addends[3], kh));
  EXPECT_TRUE(only(addends[4], kw) && only(addends[5], kw));
}

// A register tile's row r is unrolled: codegen binds each copy to a
// constant, so r's term goes with the outer tile loop's, before k's.
TEST(ReassociateIndexTest, UnrolledVariablesCountAsConstants) {
  te::ExprBuilder b;
  Var ib = b.NewVar("ib", 5), k = b.NewVar("k", 16), r = b.NewVar("r", 6);
  Expr pixel = b.Min(b.Add(b.Mul(b.Ref(ib), b.Int(6)), b.Ref(r)), b.Int(27));
  Expr horner = b.Add(b.Mul(b.Ref(k), b.Int(28)), pixel);
  Stmt nest =
      MakeFor(ib, ForKind::kSerial,
              MakeFor(k, ForKind::kSerial,
                      MakeFor(r, ForKind::kUnrolled,
                              MakeStore(0, b.Int(0), b.Load(1, te::ScalarType::kF32, {horner})))));
  const Stmt out = ReassociateIndices(nest);
  const Expr& load = out->children[0]->children[0]->children[0]->value;
  ASSERT_EQ(load->kind, te::ExprKind::kLoad);
  const Expr& regrouped = load->operands[0];
  EXPECT_EQ(Values(regrouped, {ib, k, r}), Values(horner, {ib, k, r}));
  std::vector<Expr> addends = Addends(regrouped);
  ASSERT_EQ(addends.size(), 2u);
  EXPECT_EQ(addends[0], pixel);
  EXPECT_FALSE(DependsOn(addends[0], k.get()));
  EXPECT_TRUE(DependsOn(addends[1], k.get()));
}

// A reduction's variable is a loop codegen opens inside the store: its term
// comes after those of every loop around the store.
TEST(ReassociateIndexTest, ReductionVariablesAreInnermost) {
  te::ExprBuilder b;
  Var i = b.NewVar("i", 4), rk = b.NewVar("rk", 9);
  Expr horner = b.Mul(b.Add(b.Mul(b.Ref(rk), b.Int(4)), b.Ref(i)), b.Int(3));
  Expr sum = b.Reduce(te::ReduceOp::kSum, {rk}, b.Load(1, te::ScalarType::kF32, {horner}));
  Stmt out = ReassociateIndices(MakeFor(i, ForKind::kSerial, MakeStore(0, b.Ref(i), sum)));
  const Expr& reduce = out->children[0]->value;
  ASSERT_EQ(reduce->kind, te::ExprKind::kReduce);
  const Expr& regrouped = reduce->operands[0]->operands[0];
  EXPECT_EQ(Values(regrouped, {i, rk}), Values(horner, {i, rk}));
  std::vector<Expr> addends = Addends(regrouped);
  ASSERT_EQ(addends.size(), 2u);
  EXPECT_FALSE(DependsOn(addends[0], rk.get()));
  EXPECT_TRUE(DependsOn(addends[1], rk.get()));
}

}  // namespace
}  // namespace kiln::lower
