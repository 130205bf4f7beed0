#include "compiler/lower/lane_block_vector_loops.h"

#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

#include "compiler/lower/linear_form.h"
#include "compiler/lower/simplify_index.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;

constexpr int64_t kLanes = 16;  // float32 lanes of a 512-bit vector

// The strides along `x` of every load in `e`, nullopt for a load that has
// none (a gather along x).
std::vector<std::optional<int64_t>> LoadStrides(const Expr& e, const te::VarNode* x) {
  std::vector<std::optional<int64_t>> strides;
  std::unordered_set<const te::ExprNode*> seen;
  std::function<void(const Expr&)> visit = [&](const Expr& n) {
    if (!seen.insert(n.get()).second) return;
    if (n->kind == ExprKind::kLoad) strides.push_back(StrideAlong(n->operands[0], x));
    for (const Expr& o : n->operands) visit(o);
  };
  visit(e);
  return strides;
}

Stmt Rewrite(const Stmt& s, te::ExprBuilder& b) {
  switch (s->kind) {
    case StmtKind::kSeq: {
      std::vector<Stmt> children;
      for (const Stmt& c : s->children) children.push_back(Rewrite(c, b));
      return MakeSeq(std::move(children));
    }
    case StmtKind::kStore:
    case StmtKind::kPrefetch:
    case StmtKind::kCall:
      return s;
    case StmtKind::kFor:
      break;
  }
  const Stmt& body = s->children[0];
  const te::Var& x = s->var;
  auto unchanged = [&] { return MakeFor(s->var, s->for_kind, Rewrite(body, b)); };
  if (s->for_kind != ForKind::kVectorized || body->kind != StmtKind::kStore ||
      x->extent <= kLanes || x->extent % kLanes != 0 || StrideAlong(body->index, x.get()) != 1) {
    return unchanged();
  }
  bool gathers = false;
  for (const std::optional<int64_t>& step : LoadStrides(body->value, x.get())) {
    if (!step) gathers = true;
  }
  if (!gathers) return unchanged();

  te::Var block = b.NewVar(x->name + "b", x->extent / kLanes);
  te::Var lane = b.NewVar(x->name + "v", kLanes);
  const Expr at = b.Add(b.Mul(b.Ref(block), b.Int(kLanes)), b.Ref(lane));
  auto place = [&](const Expr& e) { return e ? SimplifyIndex(b, b.Substitute(e, {x}, {at})) : e; };
  const Expr index = place(body->index);
  const Expr value = place(body->value);
  if (StrideAlong(index, lane.get()) != 1) return unchanged();
  for (const std::optional<int64_t>& step : LoadStrides(value, lane.get())) {
    if (step != 0 && step != 1) return unchanged();
  }
  Stmt store = MakeStore(body->buffer, index, value, place(body->predicate));
  return MakeFor(block, ForKind::kSerial, MakeFor(lane, ForKind::kVector, store));
}

}  // namespace

Stmt BlockLaneDividedVectorLoops(const Stmt& body, te::ExprBuilder& builder) {
  return Rewrite(body, builder);
}

}  // namespace kiln::lower
