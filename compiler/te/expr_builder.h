// Makes interned Exprs and folds trivial integer arithmetic as it goes (index
// expressions are full of `i * 1 + 0`), so equal expressions share one node.
#ifndef KILN_COMPILER_TE_EXPR_BUILDER_H_
#define KILN_COMPILER_TE_EXPR_BUILDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/te/expr.h"

namespace kiln::te {

class ExprBuilder {
 public:
  Var NewVar(std::string name, int64_t extent);

  Expr Int(int64_t v);
  Expr Bool(bool v);
  Expr Float(double v);
  Expr Ref(const Var& v);
  Expr Load(int buffer, ScalarType type, std::vector<Expr> indices);

  Expr Binary(BinaryOp op, Expr a, Expr b);
  Expr Add(Expr a, Expr b) { return Binary(BinaryOp::kAdd, std::move(a), std::move(b)); }
  Expr Sub(Expr a, Expr b) { return Binary(BinaryOp::kSub, std::move(a), std::move(b)); }
  Expr Mul(Expr a, Expr b) { return Binary(BinaryOp::kMul, std::move(a), std::move(b)); }
  Expr Div(Expr a, Expr b) { return Binary(BinaryOp::kDiv, std::move(a), std::move(b)); }
  Expr Mod(Expr a, Expr b) { return Binary(BinaryOp::kMod, std::move(a), std::move(b)); }
  Expr Min(Expr a, Expr b) { return Binary(BinaryOp::kMin, std::move(a), std::move(b)); }
  Expr Max(Expr a, Expr b) { return Binary(BinaryOp::kMax, std::move(a), std::move(b)); }
  Expr Unary(UnaryOp op, Expr a);
  Expr Compare(CompareOp op, Expr a, Expr b);
  Expr Select(Expr cond, Expr a, Expr b);
  Expr Cast(ScalarType type, Expr a);
  Expr Reduce(ReduceOp op, std::vector<Var> vars, Expr body);

  // Padded reads: whether index `v` lies in [0, n), and `v` clamped into it.
  // Loads are evaluated eagerly, so a read that may fall in the padding
  // selects on the first and loads at the second.
  Expr InRange(Expr v, int64_t n) {
    Expr low = Compare(CompareOp::kGE, v, Int(0));
    return Binary(BinaryOp::kAnd, std::move(low), Compare(CompareOp::kLT, std::move(v), Int(n)));
  }
  Expr ClampIndex(Expr v, int64_t n) { return Max(Int(0), Min(std::move(v), Int(n - 1))); }

  // A constant of `type` (0/1 style literals for generic op definitions).
  Expr Constant(ScalarType type, double v);

  // `e` with its operands replaced (same kind, op, buffer, type, reduce vars).
  Expr Rebuild(const Expr& e, std::vector<Expr> operands);

  // Rebuilds `e` with each Var in `from` replaced by the matching Expr in `to`.
  Expr Substitute(const Expr& e, const std::vector<Var>& from, const std::vector<Expr>& to);

  // Rebuilds `root` bottom-up: each node, its operands already rewritten, is
  // replaced by `post` of it (return the node itself to keep it). Shared
  // nodes are visited once.
  Expr Rewrite(const Expr& root, const std::function<Expr(const Expr&)>& post);

  // `root` with every occurrence of the node `from` replaced by `to`.
  Expr Replace(const Expr& root, const Expr& from, const Expr& to);

 private:
  // A float literal takes the float type of the value it meets: op computes
  // write `x * Float(0.5)` once for float32 and float64 tensors alike (TVM's
  // make_const of the other operand's dtype); any other float32 operand
  // meeting a float64 one is promoted (a mismatch would stop the compiler).
  void MatchLiteral(Expr& a, Expr& b);

  Expr Intern(ExprNode node);

  using Key = std::tuple<int, int, int64_t, uint64_t, int, std::vector<const ExprNode*>,
                         const VarNode*, int, std::vector<const VarNode*>>;
  std::map<Key, Expr> interned_;
  int64_t next_var_id_ = 0;
};

}  // namespace kiln::te

#endif  // KILN_COMPILER_TE_EXPR_BUILDER_H_
