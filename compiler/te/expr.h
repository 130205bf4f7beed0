// Tensor expressions: the scalar index language every op's compute is written in
// (TVM's TE / TIR expressions, kept small).
//
// An Expr is an immutable DAG node. Nodes are made only through an ExprBuilder,
// which interns them (hash-consing): two structurally equal expressions built by
// one builder are the same pointer. Lowering relies on that for common-subexpression
// reuse and for sharing a hoisted reduction; codegen memoises by pointer.
#ifndef KILN_COMPILER_TE_EXPR_H_
#define KILN_COMPILER_TE_EXPR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::te {

// The types values are computed in. Tensors of narrower types widen into
// these on load (float16 and bfloat16 into kF32, every integer type into kI64)
// and narrow again on store.
enum class ScalarType { kF32, kI64, kBool, kF64 };

inline bool IsFloat(ScalarType t) { return t == ScalarType::kF32 || t == ScalarType::kF64; }

enum class ExprKind {
  kIntImm,    // int_value (type kI64 or kBool)
  kFloatImm,  // float_value (type kF32 or kF64)
  kVar,       // var: a loop or reduction variable, type kI64
  kLoad,      // buffer[operands...]: multi-dim before flattening, one flat index after
  kBinary,    // op: BinaryOp; operands a, b of the same type
  kUnary,     // op: UnaryOp; operand a
  kCompare,   // op: CompareOp; operands a, b; type kBool
  kSelect,    // operands cond, a, b
  kCast,      // operand a converted to `type`
  kReduce,    // op: ReduceOp over reduce_vars of operands[0] (the body)
};

// kShl and kShr shift an integer's bits (kShr logically: the unsigned types
// ONNX shifts are zero-extended into int64, so their bits shift as they
// would in their own width); a shift by 64 or more, or by a negative amount,
// gives 0.
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMod, kMin, kMax, kPow, kAnd, kOr, kShl, kShr };
// kRound rounds half to even (ONNX Round, C's nearbyint). The kWrap ops keep
// an int64 value to what an integer type of that width holds (two's
// complement wrapping, as a store would); kRoundF16/kRoundBF16 round a float
// to the nearest float16/bfloat16 (to nearest even), both staying in their
// compute type: they are how a narrow element type shows inside a kernel.
enum class UnaryOp { kNeg, kExp, kLog, kSqrt, kTanh, kAbs, kErf, kFloor, kNot, kSin, kCos, kAtan,
                     kRound, kWrapI8, kWrapU8, kWrapI16, kWrapU16, kWrapI32, kWrapU32,
                     kRoundF16, kRoundBF16 };
enum class CompareOp { kLT, kLE, kGT, kGE, kEQ, kNE };
enum class ReduceOp { kSum, kMax, kMin, kProd };

// A loop or reduction variable ranging over [0, extent). Identity matters: two
// VarNodes with the same name are different variables.
struct VarNode {
  std::string name;
  int64_t extent = 0;
  int64_t id = 0;  // unique within its builder; orders vars deterministically
};
using Var = std::shared_ptr<const VarNode>;

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprKind kind = ExprKind::kIntImm;
  ScalarType type = ScalarType::kI64;
  int64_t int_value = 0;
  double float_value = 0;
  int op = 0;  // BinaryOp / UnaryOp / CompareOp / ReduceOp, per kind
  std::vector<Expr> operands;
  Var var;                       // kVar
  int buffer = -1;               // kLoad
  std::vector<Var> reduce_vars;  // kReduce

  BinaryOp binary_op() const { return static_cast<BinaryOp>(op); }
  UnaryOp unary_op() const { return static_cast<UnaryOp>(op); }
  CompareOp compare_op() const { return static_cast<CompareOp>(op); }
  ReduceOp reduce_op() const { return static_cast<ReduceOp>(op); }
  bool IsIntConst(int64_t v) const { return kind == ExprKind::kIntImm && int_value == v; }
};

// A readable one-line rendering, for IR dumps and test failure messages:
// `e` as text, cut at about `limit` characters with "..." (shared nodes
// print once per use, so a deep DAG would print exponentially long).
inline constexpr size_t kExprPrintLimit = 64 << 10;
std::string ExprToString(const Expr& e, size_t limit = kExprPrintLimit);

const char* ScalarTypeName(ScalarType t);

}  // namespace kiln::te

#endif  // KILN_COMPILER_TE_EXPR_H_
