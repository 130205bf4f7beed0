#include "compiler/lower/strided_vector_loops.h"

#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

#include "common/int_math.h"
#include "compiler/lower/linear_form.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;

// Whether some load of `e` steps by 2 to 4 elements along `x`, and every load
// that varies with `x` steps by a constant (no gathers left to keep).
bool HasSmallStridedLoad(const Expr& e, const te::VarNode* x) {
  bool strided = false, affine = true;
  std::unordered_set<const te::ExprNode*> seen;
  std::function<void(const Expr&)> visit = [&](const Expr& n) {
    if (!seen.insert(n.get()).second) return;
    if (n->kind == ExprKind::kLoad) {
      const std::optional<int64_t> step = StrideAlong(n->operands[0], x);
      if (!step) affine = false;
      if (step && *step >= 2 && *step <= 4) strided = true;
    }
    for (const Expr& o : n->operands) visit(o);
  };
  visit(e);
  return strided && affine;
}

// The loop `s` as blocks of lanes, or null where the rewrite does not apply.
Stmt InStridedBlocks(const Stmt& s, te::ExprBuilder& b) {
  const Stmt& body = s->children[0];
  const te::Var& x = s->var;
  if (s->for_kind != ForKind::kVectorized || body->kind != StmtKind::kStore ||
      x->extent < kStridedBlockLanes || StrideAlong(body->index, x.get()) != 1 ||
      !HasSmallStridedLoad(body->value, x.get())) {
    return nullptr;
  }
  const int64_t blocks = CeilDiv(x->extent, kStridedBlockLanes);
  te::Var block = b.NewVar(x->name + "b", blocks);
  te::Var lane = b.NewVar(x->name + "v", kStridedBlockLanes);
  Expr at = b.Add(b.Mul(b.Ref(block), b.Int(kStridedBlockLanes)), b.Ref(lane));
  auto place = [&](const Expr& e) { return e ? b.Substitute(e, {x}, {at}) : e; };
  Expr predicate = place(body->predicate);
  if (blocks * kStridedBlockLanes != x->extent) {
    Expr inside = b.Compare(te::CompareOp::kLT, at, b.Int(x->extent));
    predicate = predicate ? b.Binary(te::BinaryOp::kAnd, predicate, inside) : inside;
  }
  Stmt store = MakeStore(body->buffer, place(body->index), place(body->value), predicate);
  return MakeFor(block, ForKind::kSerial, MakeFor(lane, ForKind::kVector, store));
}

}  // namespace

Stmt BlockStridedVectorLoops(const Stmt& body, te::ExprBuilder& builder) {
  return RewriteLoops(body, [&](const Stmt& loop) { return InStridedBlocks(loop, builder); });
}

}  // namespace kiln::lower
