#include "compiler/lower/simplify_index.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::lower {
namespace {

using te::BinaryOp;
using te::Expr;
using te::ExprKind;

struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
};

// The closed range of an i64 expression, or nullopt when unknown (loads,
// products of variables, divisions of possibly negative values).
std::optional<Range> RangeOf(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
      return Range{e->int_value, e->int_value};
    case ExprKind::kVar:
      if (e->var->extent <= 0) return std::nullopt;
      return Range{0, e->var->extent - 1};
    case ExprKind::kSelect: {
      auto a = RangeOf(e->operands[1]), b = RangeOf(e->operands[2]);
      if (!a || !b) return std::nullopt;
      return Range{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
    }
    case ExprKind::kBinary:
      break;
    default:
      return std::nullopt;
  }
  if (e->type != te::ScalarType::kI64) return std::nullopt;
  auto a = RangeOf(e->operands[0]), b = RangeOf(e->operands[1]);
  if (!a || !b) return std::nullopt;
  switch (e->binary_op()) {
    case BinaryOp::kAdd:
      return Range{a->lo + b->lo, a->hi + b->hi};
    case BinaryOp::kSub:
      return Range{a->lo - b->hi, a->hi - b->lo};
    case BinaryOp::kMul: {
      if (b->lo != b->hi && a->lo != a->hi) return std::nullopt;  // keep it linear
      const int64_t p[] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
      return Range{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case BinaryOp::kDiv:
      if (b->lo != b->hi || b->lo <= 0 || a->lo < 0) return std::nullopt;
      return Range{a->lo / b->lo, a->hi / b->lo};
    case BinaryOp::kMod:
      if (b->lo != b->hi || b->lo <= 0 || a->lo < 0) return std::nullopt;
      return a->hi < b->lo ? *a : Range{0, b->lo - 1};
    case BinaryOp::kMin:
      return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    case BinaryOp::kMax:
      return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    default:
      return std::nullopt;
  }
}

// `e` as constant + sum(coefficient * term), looking through +, - and
// multiplication by a constant.
struct Sum {
  int64_t constant = 0;
  std::vector<std::pair<int64_t, Expr>> terms;
};

void Collect(const Expr& e, int64_t scale, Sum& out) {
  if (e->kind == ExprKind::kIntImm) {
    out.constant += scale * e->int_value;
    return;
  }
  if (e->kind == ExprKind::kBinary) {
    const Expr& a = e->operands[0];
    const Expr& b = e->operands[1];
    switch (e->binary_op()) {
      case BinaryOp::kAdd:
        Collect(a, scale, out);
        Collect(b, scale, out);
        return;
      case BinaryOp::kSub:
        Collect(a, scale, out);
        Collect(b, -scale, out);
        return;
      case BinaryOp::kMul:
        if (b->kind == ExprKind::kIntImm) return Collect(a, scale * b->int_value, out);
        if (a->kind == ExprKind::kIntImm) return Collect(b, scale * a->int_value, out);
        break;
      default:
        break;
    }
  }
  out.terms.emplace_back(scale, e);
}

Expr Build(te::ExprBuilder& b, const std::vector<std::pair<int64_t, Expr>>& terms,
           int64_t constant) {
  Expr sum = b.Int(0);
  for (const auto& [coefficient, term] : terms) {
    sum = b.Add(sum, b.Mul(term, b.Int(coefficient)));
  }
  return b.Add(sum, b.Int(constant));
}

// n / d or n % d (d > 0) simplified, or null when the rule does not apply.
Expr DivMod(te::ExprBuilder& b, const Expr& n, int64_t d, bool mod) {
  const std::optional<Range> whole = RangeOf(n);
  if (!whole || whole->lo < 0) return nullptr;
  Sum sum;
  Collect(n, 1, sum);
  std::vector<std::pair<int64_t, Expr>> quotient, rest;
  for (const auto& [coefficient, term] : sum.terms) {
    if (coefficient % d == 0) {
      quotient.emplace_back(coefficient / d, term);
    } else {
      rest.emplace_back(coefficient, term);
    }
  }
  // constant = d * q + r with 0 <= r < d.
  int64_t q = sum.constant / d, r = sum.constant % d;
  if (r < 0) {
    r += d;
    --q;
  }
  const Expr rest_expr = Build(b, rest, r);
  const std::optional<Range> rest_range = RangeOf(rest_expr);
  if (!rest_range || rest_range->lo < 0) return nullptr;
  const bool below = rest_range->hi < d;
  if (quotient.empty() && q == 0 && !below) return nullptr;  // nothing to gain
  if (mod) return below ? rest_expr : b.Mod(rest_expr, b.Int(d));
  Expr result = Build(b, quotient, q);
  return below ? result : b.Add(result, b.Div(rest_expr, b.Int(d)));
}

}  // namespace

Expr SimplifyIndex(te::ExprBuilder& b, const Expr& e) {
  return b.Rewrite(e, [&b](const Expr& x) {
    if (x->kind != ExprKind::kBinary || x->type != te::ScalarType::kI64 ||
        (x->binary_op() != BinaryOp::kDiv && x->binary_op() != BinaryOp::kMod) ||
        x->operands[1]->kind != ExprKind::kIntImm || x->operands[1]->int_value <= 0) {
      return x;
    }
    Expr simpler =
        DivMod(b, x->operands[0], x->operands[1]->int_value, x->binary_op() == BinaryOp::kMod);
    // The parts may simplify further (a quotient's own divisions).
    return simpler ? SimplifyIndex(b, simpler) : x;
  });
}

Stmt SimplifyIndices(te::ExprBuilder& b, const Stmt& s) {
  return MapExprs(s, [&b](const Expr& e) { return e ? SimplifyIndex(b, e) : e; });
}

}  // namespace kiln::lower
