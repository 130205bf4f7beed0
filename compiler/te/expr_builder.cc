#include "compiler/te/expr_builder.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "common/status_macros.h"

namespace kiln::te {

Var ExprBuilder::NewVar(std::string name, int64_t extent) {
  auto v = std::make_shared<VarNode>();
  v->name = std::move(name);
  v->extent = extent;
  v->id = next_var_id_++;
  return v;
}

Expr ExprBuilder::Intern(ExprNode node) {
  std::vector<const ExprNode*> operand_ptrs;
  operand_ptrs.reserve(node.operands.size());
  for (const Expr& e : node.operands) operand_ptrs.push_back(e.get());
  std::vector<const VarNode*> rvars;
  for (const Var& v : node.reduce_vars) rvars.push_back(v.get());
  uint64_t float_bits = 0;
  std::memcpy(&float_bits, &node.float_value, sizeof float_bits);
  Key key{static_cast<int>(node.kind), static_cast<int>(node.type), node.int_value,
          float_bits,  node.op,  std::move(operand_ptrs),
          node.var.get(), node.buffer, std::move(rvars)};
  auto it = interned_.find(key);
  if (it != interned_.end()) return it->second;
  Expr e = std::make_shared<const ExprNode>(std::move(node));
  interned_.emplace(std::move(key), e);
  return e;
}

Expr ExprBuilder::Int(int64_t v) {
  ExprNode n;
  n.kind = ExprKind::kIntImm;
  n.type = ScalarType::kI64;
  n.int_value = v;
  return Intern(std::move(n));
}

Expr ExprBuilder::Bool(bool v) {
  ExprNode n;
  n.kind = ExprKind::kIntImm;
  n.type = ScalarType::kBool;
  n.int_value = v ? 1 : 0;
  return Intern(std::move(n));
}

Expr ExprBuilder::Float(double v) {
  ExprNode n;
  n.kind = ExprKind::kFloatImm;
  n.type = ScalarType::kF32;
  n.float_value = static_cast<double>(static_cast<float>(v));
  return Intern(std::move(n));
}

Expr ExprBuilder::Constant(ScalarType type, double v) {
  switch (type) {
    case ScalarType::kF32:
      return Float(v);
    case ScalarType::kI64:
      return Int(static_cast<int64_t>(v));
    case ScalarType::kBool:
      return Bool(v != 0);
    case ScalarType::kF64: {
      ExprNode n;
      n.kind = ExprKind::kFloatImm;
      n.type = ScalarType::kF64;
      n.float_value = v;
      return Intern(std::move(n));
    }
  }
  return Float(v);
}

Expr ExprBuilder::Ref(const Var& v) {
  if (v->extent == 1) return Int(0);  // a unit loop's variable is always 0
  ExprNode n;
  n.kind = ExprKind::kVar;
  n.type = ScalarType::kI64;
  n.var = v;
  return Intern(std::move(n));
}

Expr ExprBuilder::Load(int buffer, ScalarType type, std::vector<Expr> indices) {
  ExprNode n;
  n.kind = ExprKind::kLoad;
  n.type = type;
  n.buffer = buffer;
  n.operands = std::move(indices);
  return Intern(std::move(n));
}

namespace {
int64_t FoldInt(BinaryOp op, int64_t a, int64_t b, bool& ok) {
  ok = true;
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      if (b != 0) return a / b;
      break;
    case BinaryOp::kMod:
      if (b != 0) return a % b;
      break;
    case BinaryOp::kMin:
      return a < b ? a : b;
    case BinaryOp::kMax:
      return a > b ? a : b;
    default:
      break;
  }
  ok = false;
  return 0;
}
}  // namespace

void ExprBuilder::MatchLiteral(Expr& a, Expr& b) {
  if (a->type == b->type) return;
  auto widen = [&](Expr& lit, const Expr& other) {
    if (lit->kind == ExprKind::kFloatImm && IsFloat(other->type)) {
      lit = Constant(other->type, lit->float_value);
    }
  };
  widen(a, b);
  widen(b, a);
  // A float32 expression built from literals (a window count, a constant
  // weight) meeting float64 data is promoted, never a type mismatch: that
  // stopped the compiler (the whole server) on a float64 average pool.
  if (a->type == ScalarType::kF32 && b->type == ScalarType::kF64) a = Cast(ScalarType::kF64, a);
  if (b->type == ScalarType::kF32 && a->type == ScalarType::kF64) b = Cast(ScalarType::kF64, b);
}

Expr ExprBuilder::Binary(BinaryOp op, Expr a, Expr b) {
  MatchLiteral(a, b);
  KILN_CHECK(a->type == b->type);
  if (a->type == ScalarType::kI64) {
    if (a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm) {
      bool ok = false;
      int64_t v = FoldInt(op, a->int_value, b->int_value, ok);
      if (ok) return Int(v);
    }
    // Identities that keep flattened index arithmetic small.
    switch (op) {
      case BinaryOp::kAdd:
        if (a->IsIntConst(0)) return b;
        if (b->IsIntConst(0)) return a;
        break;
      case BinaryOp::kSub:
        if (b->IsIntConst(0)) return a;
        break;
      case BinaryOp::kMul:
        if (a->IsIntConst(0) || b->IsIntConst(1)) return a;
        if (b->IsIntConst(0) || a->IsIntConst(1)) return b;
        break;
      case BinaryOp::kDiv:
        if (b->IsIntConst(1)) return a;
        if (a->IsIntConst(0)) return a;
        break;
      case BinaryOp::kMod:
        if (b->IsIntConst(1)) return Int(0);
        if (a->IsIntConst(0)) return a;
        // A var below its modulus is itself: (i mod n) = i when i < n.
        if (a->kind == ExprKind::kVar && b->kind == ExprKind::kIntImm &&
            a->var->extent <= b->int_value) {
          return a;
        }
        break;
      default:
        break;
    }
    if (op == BinaryOp::kDiv && a->kind == ExprKind::kVar && b->kind == ExprKind::kIntImm &&
        b->int_value > 0 && a->var->extent <= b->int_value) {
      return Int(0);
    }
  }
  ExprNode n;
  n.kind = ExprKind::kBinary;
  n.type = a->type;
  n.op = static_cast<int>(op);
  n.operands = {std::move(a), std::move(b)};
  return Intern(std::move(n));
}

Expr ExprBuilder::Unary(UnaryOp op, Expr a) {
  ExprNode n;
  n.kind = ExprKind::kUnary;
  n.type = a->type;
  n.op = static_cast<int>(op);
  n.operands = {std::move(a)};
  return Intern(std::move(n));
}

Expr ExprBuilder::Compare(CompareOp op, Expr a, Expr b) {
  MatchLiteral(a, b);
  KILN_CHECK(a->type == b->type);
  ExprNode n;
  n.kind = ExprKind::kCompare;
  n.type = ScalarType::kBool;
  n.op = static_cast<int>(op);
  n.operands = {std::move(a), std::move(b)};
  return Intern(std::move(n));
}

Expr ExprBuilder::Select(Expr cond, Expr a, Expr b) {
  MatchLiteral(a, b);
  KILN_CHECK(a->type == b->type && cond->type == ScalarType::kBool);
  if (cond->kind == ExprKind::kIntImm) return cond->int_value ? a : b;
  if (a == b) return a;
  ExprNode n;
  n.kind = ExprKind::kSelect;
  n.type = a->type;
  n.operands = {std::move(cond), std::move(a), std::move(b)};
  return Intern(std::move(n));
}

Expr ExprBuilder::Cast(ScalarType type, Expr a) {
  if (a->type == type) return a;
  ExprNode n;
  n.kind = ExprKind::kCast;
  n.type = type;
  n.operands = {std::move(a)};
  return Intern(std::move(n));
}

Expr ExprBuilder::Reduce(ReduceOp op, std::vector<Var> vars, Expr body) {
  ExprNode n;
  n.kind = ExprKind::kReduce;
  n.type = body->type;
  n.op = static_cast<int>(op);
  n.operands = {std::move(body)};
  n.reduce_vars = std::move(vars);
  return Intern(std::move(n));
}

Expr ExprBuilder::Rebuild(const Expr& e, std::vector<Expr> ops) {
  switch (e->kind) {
    case ExprKind::kLoad:
      return Load(e->buffer, e->type, std::move(ops));
    case ExprKind::kBinary:
      return Binary(e->binary_op(), ops[0], ops[1]);
    case ExprKind::kUnary:
      return Unary(e->unary_op(), ops[0]);
    case ExprKind::kCompare:
      return Compare(e->compare_op(), ops[0], ops[1]);
    case ExprKind::kSelect:
      return Select(ops[0], ops[1], ops[2]);
    case ExprKind::kCast:
      return Cast(e->type, ops[0]);
    case ExprKind::kReduce:
      return Reduce(e->reduce_op(), e->reduce_vars, ops[0]);
    default:
      return e;
  }
}

Expr ExprBuilder::Substitute(const Expr& root, const std::vector<Var>& from,
                             const std::vector<Expr>& to) {
  KILN_CHECK(from.size() == to.size());
  std::unordered_map<const ExprNode*, Expr> memo;
  // Recursion depth is bounded by expression depth, which op computes keep small
  // relative to the stack (chains are DAG-shared, not nested per use).
  std::function<Expr(const Expr&)> visit = [&](const Expr& e) -> Expr {
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    Expr result;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        result = e;
        break;
      case ExprKind::kVar: {
        result = e;
        for (size_t i = 0; i < from.size(); ++i) {
          if (from[i].get() == e->var.get()) result = to[i];
        }
        break;
      }
      default: {
        std::vector<Expr> ops;
        bool changed = false;
        for (const Expr& o : e->operands) {
          ops.push_back(visit(o));
          changed |= ops.back() != o;
        }
        if (!changed) {
          result = e;
          break;
        }
        result = Rebuild(e, std::move(ops));
      }
    }
    memo.emplace(e.get(), result);
    return result;
  };
  return visit(root);
}

Expr ExprBuilder::Rewrite(const Expr& root, const std::function<Expr(const Expr&)>& post) {
  std::unordered_map<const ExprNode*, Expr> memo;
  std::function<Expr(const Expr&)> visit = [&](const Expr& e) -> Expr {
    if (!e) return e;
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    Expr result = e;
    if (!e->operands.empty()) {
      std::vector<Expr> ops;
      bool changed = false;
      for (const Expr& o : e->operands) {
        ops.push_back(visit(o));
        changed |= ops.back() != o;
      }
      if (changed) result = Rebuild(e, std::move(ops));
    }
    result = post(result);
    memo.emplace(e.get(), result);
    return result;
  };
  return visit(root);
}

Expr ExprBuilder::Replace(const Expr& root, const Expr& from, const Expr& to) {
  return Rewrite(root, [&](const Expr& e) { return e == from ? to : e; });
}

}  // namespace kiln::te
