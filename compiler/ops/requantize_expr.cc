#include "compiler/ops/requantize_expr.h"

#include "compiler/te/expr_builder.h"

namespace kiln {

te::Expr RequantizeExpr(te::ComputeContext& ctx, te::Expr sum, te::Expr scale, te::Expr bias,
                        int requant) {
  te::ExprBuilder& b = ctx.b();
  auto value = [&](int i) { return ctx.Input(requant, {b.Int(i)}); };
  te::Expr t = b.Add(b.Mul(b.Cast(te::ScalarType::kF64, sum), scale), bias);
  t = b.Min(b.Max(t, value(1)), value(2));
  te::Expr q = b.Add(b.Unary(te::UnaryOp::kRound, b.Div(t, value(0))), value(3));
  return b.Cast(te::ScalarType::kI64, b.Min(b.Max(q, value(4)), value(5)));
}

}  // namespace kiln
