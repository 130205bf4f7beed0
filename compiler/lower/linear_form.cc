#include "compiler/lower/linear_form.h"

#include <unordered_set>
#include <vector>

namespace kiln::lower {
namespace {

using te::BinaryOp;
using te::Expr;
using te::ExprKind;
using te::ExprNode;

void AddScaled(LinearForm& into, const LinearForm& from, int64_t scale) {
  into.constant += scale * from.constant;
  for (const auto& [atom, coef] : from.terms) {
    int64_t& c = into.terms[atom];
    c += scale * coef;
    if (c == 0) into.terms.erase(atom);
  }
}

bool IsDivOrModByConst(const ExprNode* e, BinaryOp op) {
  return e->kind == ExprKind::kBinary && e->binary_op() == op &&
         e->operands[1]->kind == ExprKind::kIntImm && e->operands[1]->int_value > 0;
}

// Replaces a*c*(e / c) + a*(e % c) by a*e, repeatedly (nested splits unfold
// one level at a time).
void MergeSplits(LinearForm& f) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& [div, div_coef] : f.terms) {
      if (!IsDivOrModByConst(div, BinaryOp::kDiv)) continue;
      const int64_t c = div->operands[1]->int_value;
      for (const auto& [mod, mod_coef] : f.terms) {
        if (!IsDivOrModByConst(mod, BinaryOp::kMod) || mod->operands[0] != div->operands[0] ||
            mod->operands[1]->int_value != c || div_coef != mod_coef * c) {
          continue;
        }
        const int64_t scale = mod_coef;
        const Expr inner = div->operands[0];
        const ExprNode* d = div;
        const ExprNode* m = mod;
        f.terms.erase(d);
        f.terms.erase(m);
        AddScaled(f, AnalyzeLinear(inner), scale);
        changed = true;
        break;
      }
      if (changed) break;
    }
  }
}

LinearForm Analyze(const Expr& e) {
  LinearForm f;
  switch (e->kind) {
    case ExprKind::kIntImm:
      f.constant = e->int_value;
      return f;
    case ExprKind::kBinary: {
      const BinaryOp op = e->binary_op();
      if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
        f = Analyze(e->operands[0]);
        AddScaled(f, Analyze(e->operands[1]), op == BinaryOp::kAdd ? 1 : -1);
        return f;
      }
      if (op == BinaryOp::kMul) {
        LinearForm a = Analyze(e->operands[0]);
        LinearForm b = Analyze(e->operands[1]);
        if (b.terms.empty()) {
          AddScaled(f, a, b.constant);
          return f;
        }
        if (a.terms.empty()) {
          AddScaled(f, b, a.constant);
          return f;
        }
      }
      break;
    }
    default:
      break;
  }
  f.terms[e.get()] = 1;
  return f;
}

}  // namespace

LinearForm AnalyzeLinear(const Expr& e) {
  LinearForm f = Analyze(e);
  MergeSplits(f);
  return f;
}

bool DependsOn(const Expr& e, const te::VarNode* x) {
  std::vector<const ExprNode*> stack{e.get()};
  std::unordered_set<const ExprNode*> seen;
  while (!stack.empty()) {
    const ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->kind == ExprKind::kVar && n->var.get() == x) return true;
    for (const Expr& o : n->operands) stack.push_back(o.get());
  }
  return false;
}

std::optional<int64_t> StrideAlong(const Expr& e, const te::VarNode* x) {
  LinearForm f = AnalyzeLinear(e);
  int64_t stride = 0;
  for (const auto& [atom, coef] : f.terms) {
    if (atom->kind == ExprKind::kVar) {
      if (atom->var.get() == x) stride += coef;
      continue;
    }
    // Atoms are sub-trees of `e`; wrap without copying to reuse DependsOn.
    std::vector<const ExprNode*> stack{atom};
    std::unordered_set<const ExprNode*> seen;
    while (!stack.empty()) {
      const ExprNode* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->kind == ExprKind::kVar && n->var.get() == x) return std::nullopt;
      for (const Expr& o : n->operands) stack.push_back(o.get());
    }
  }
  return stride;
}

std::optional<LinearForm> AffineInVars(const Expr& e) {
  LinearForm f = AnalyzeLinear(e);
  for (const auto& [atom, coef] : f.terms) {
    if (atom->kind != ExprKind::kVar) return std::nullopt;
  }
  return f;
}

}  // namespace kiln::lower
