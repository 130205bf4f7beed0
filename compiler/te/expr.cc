#include "compiler/te/expr.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::te {

const char* ScalarTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kF32:
      return "f32";
    case ScalarType::kI64:
      return "i64";
    case ScalarType::kBool:
      return "bool";
    case ScalarType::kF64:
      return "f64";
  }
  return "?";
}

namespace {
const char* BinaryName(BinaryOp op) {
  static const char* kNames[] = {"+", "-", "*", "/", "%", "min", "max", "pow", "&&", "||",
                                 "<<", ">>"};
  return kNames[static_cast<int>(op)];
}
const char* UnaryName(UnaryOp op) {
  static const char* kNames[] = {"neg", "exp", "log", "sqrt", "tanh", "abs", "erf",
                                 "floor", "not", "sin", "cos", "atan", "round",
                                 "wrap_i8", "wrap_u8", "wrap_i16", "wrap_u16", "wrap_i32",
                                 "wrap_u32", "round_f16", "round_bf16"};
  return kNames[static_cast<int>(op)];
}
const char* CompareName(CompareOp op) {
  static const char* kNames[] = {"<", "<=", ">", ">=", "==", "!="};
  return kNames[static_cast<int>(op)];
}
const char* ReduceName(ReduceOp op) {
  static const char* kNames[] = {"sum", "max", "min", "prod"};
  return kNames[static_cast<int>(op)];
}
}  // namespace

std::string ExprToString(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
      return absl::StrCat(e->int_value);
    case ExprKind::kFloatImm:
      return absl::StrCat(e->float_value, "f");
    case ExprKind::kVar:
      return e->var->name;
    case ExprKind::kLoad: {
      std::vector<std::string> idx;
      for (const Expr& i : e->operands) idx.push_back(ExprToString(i));
      return absl::StrCat("b", e->buffer, "[", absl::StrJoin(idx, ", "), "]");
    }
    case ExprKind::kBinary: {
      BinaryOp op = e->binary_op();
      if (op == BinaryOp::kMin || op == BinaryOp::kMax || op == BinaryOp::kPow) {
        return absl::StrCat(BinaryName(op), "(", ExprToString(e->operands[0]), ", ",
                            ExprToString(e->operands[1]), ")");
      }
      return absl::StrCat("(", ExprToString(e->operands[0]), " ", BinaryName(op), " ",
                          ExprToString(e->operands[1]), ")");
    }
    case ExprKind::kUnary:
      return absl::StrCat(UnaryName(e->unary_op()), "(", ExprToString(e->operands[0]), ")");
    case ExprKind::kCompare:
      return absl::StrCat("(", ExprToString(e->operands[0]), " ", CompareName(e->compare_op()),
                          " ", ExprToString(e->operands[1]), ")");
    case ExprKind::kSelect:
      return absl::StrCat("select(", ExprToString(e->operands[0]), ", ",
                          ExprToString(e->operands[1]), ", ", ExprToString(e->operands[2]), ")");
    case ExprKind::kCast:
      return absl::StrCat(ScalarTypeName(e->type), "(", ExprToString(e->operands[0]), ")");
    case ExprKind::kReduce: {
      std::vector<std::string> vars;
      for (const Var& v : e->reduce_vars) vars.push_back(absl::StrCat(v->name, "<", v->extent));
      return absl::StrCat(ReduceName(e->reduce_op()), "[", absl::StrJoin(vars, ", "), "](",
                          ExprToString(e->operands[0]), ")");
    }
  }
  return "?";
}

}  // namespace kiln::te
