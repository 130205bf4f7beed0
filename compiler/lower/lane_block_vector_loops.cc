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

// The loop `s` as blocks of lanes, or null where the rewrite does not apply.
Stmt InLaneBlocks(const Stmt& s, te::ExprBuilder& b) {
  const Stmt& body = s->children[0];
  const te::Var& x = s->var;
  if (s->for_kind != ForKind::kVectorized || body->kind != StmtKind::kStore ||
      x->extent <= kLanes || x->extent % kLanes != 0 || StrideAlong(body->index, x.get()) != 1) {
    return nullptr;
  }
  bool gathers = false;
  for (const std::optional<int64_t>& step : LoadStrides(body->value, x.get())) {
    if (!step) gathers = true;
  }
  if (!gathers) return nullptr;

  te::Var block = b.NewVar(x->name + "b", x->extent / kLanes);
  te::Var lane = b.NewVar(x->name + "v", kLanes);
  const Expr at = b.Add(b.Mul(b.Ref(block), b.Int(kLanes)), b.Ref(lane));
  auto place = [&](const Expr& e) { return e ? SimplifyIndex(b, b.Substitute(e, {x}, {at})) : e; };
  const Expr index = place(body->index);
  const Expr value = place(body->value);
  if (StrideAlong(index, lane.get()) != 1) return nullptr;
  for (const std::optional<int64_t>& step : LoadStrides(value, lane.get())) {
    if (step != 0 && step != 1) return nullptr;
  }
  Stmt store = MakeStore(body->buffer, index, value, place(body->predicate));
  return MakeFor(block, ForKind::kSerial, MakeFor(lane, ForKind::kVector, store));
}

}  // namespace

Stmt BlockLaneDividedVectorLoops(const Stmt& body, te::ExprBuilder& builder) {
  return RewriteLoops(body, [&](const Stmt& loop) { return InLaneBlocks(loop, builder); });
}

}  // namespace kiln::lower
