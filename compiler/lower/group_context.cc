#include "compiler/lower/group_context.h"

#include <functional>

#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/te/compute_context.h"

namespace kiln::lower {

using te::Expr;
using te::ExprKind;
using te::Var;

GroupContext::GroupContext(const std::vector<const Node*>& members) : members(members) {
  for (const Node* m : members) member_set.insert(m);
}

bool GroupContext::IsBaked(const Node* n) {
  return n->is_constant() && n->type.NumElements() == 1;
}

Expr GroupContext::BakedValue(const Node* n) {
  const te::ScalarType t = te::ScalarTypeOf(n->type.dtype);
  const void* data = n->value->bytes.data();
  if (te::IsFloat(t)) return b.Constant(t, ReadElementAsDouble(n->type.dtype, data, 0));
  const int64_t v = ReadElementAsInt(n->type.dtype, data, 0);
  return t == te::ScalarType::kBool ? b.Bool(v != 0) : b.Int(v);
}

Expr GroupContext::ValueOf(const Node* n, const std::vector<Expr>& idx) {
  if (!member_set.count(n)) {
    if (IsBaked(n)) return BakedValue(n);
    return b.Load(param_index.at(n), te::ScalarTypeOf(n->type.dtype), idx);
  }
  std::vector<const te::ExprNode*> key_idx;
  for (const Expr& e : idx) key_idx.push_back(e.get());
  auto key = std::make_pair(n, key_idx);
  auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  std::vector<TensorType> in_types;
  std::vector<te::Accessor> accessors;
  for (const Node* in : n->inputs) {
    in_types.push_back(in->type);
    accessors.push_back([this, in](const std::vector<Expr>& i) { return ValueOf(in, i); });
  }
  te::ComputeContext ctx(b, n->attrs, in_types, n->type, std::move(accessors), idx);
  Expr e = n->op->compute(ctx);
  // A narrow integer result wraps as its tensor would, though it never goes
  // to memory here: uint8 200 + 100 is 44 to its consumer too. Floats of
  // 16 bits are not rounded between fused ops: inside a kernel they compute
  // in float32 (an explicit cast rounds; see the cast op).
  if (IsIntegerDType(n->type.dtype)) {
    if (std::optional<te::UnaryOp> wrap = te::NarrowingOp(n->type.dtype)) e = b.Unary(*wrap, e);
  }
  memo.emplace(std::move(key), e);
  return e;
}

const VarSet& GroupContext::FreeVars(const Expr& e) {
  auto it = free_.find(e.get());
  if (it != free_.end()) return it->second;
  VarSet vars;
  if (e->kind == ExprKind::kVar) {
    vars.insert(e->var.get());
  } else {
    for (const Expr& o : e->operands) {
      const VarSet& sub = FreeVars(o);
      vars.insert(sub.begin(), sub.end());
    }
    for (const Var& v : e->reduce_vars) vars.erase(v.get());
  }
  return free_.emplace(e.get(), std::move(vars)).first->second;
}

Expr GroupContext::FlatIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& idx) {
  Expr flat = b.Int(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    flat = b.Add(b.Mul(flat, b.Int(shape[d])), idx[d]);
  }
  return flat;
}

Expr GroupContext::Flatten(const Expr& root) {
  std::unordered_map<const te::ExprNode*, Expr> flat;
  return Flatten(root, flat);
}

Expr GroupContext::Flatten(const Expr& root, std::unordered_map<const te::ExprNode*, Expr>& flat) {
  std::function<Expr(const Expr&)> visit = [&](const Expr& e) -> Expr {
    auto it = flat.find(e.get());
    if (it != flat.end()) return it->second;
    Expr result = e;
    if (!e->operands.empty()) {
      std::vector<Expr> ops;
      for (const Expr& o : e->operands) ops.push_back(visit(o));
      if (e->kind == ExprKind::kLoad) {
        const int id = BufferId(e->buffer);
        result = b.Load(id, e->type, {FlatIndex(shapes[id], ops)});
      } else {
        result = b.Rebuild(e, std::move(ops));
      }
    } else if (e->kind == ExprKind::kLoad) {  // a rank-0 buffer
      result = b.Load(BufferId(e->buffer), e->type, {b.Int(0)});
    }
    flat.emplace(e.get(), result);
    return result;
  };
  return visit(root);
}

}  // namespace kiln::lower
