#include "compiler/te/expr.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

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

namespace {

// Prints an expression until its text reaches `limit` characters, then
// "..." and nothing more: an expression is a DAG whose shared nodes print
// once per use, so a chain of n x + x prints 2^n leaves; the limit keeps
// printing linear in it.
class LimitedPrinter {
 public:
  explicit LimitedPrinter(size_t limit) : limit_(limit) {}

  void Print(const Expr& e) {
    if (cut_) return;
    auto operand = [&](int i) { Print(e->operands[i]); };
    switch (e->kind) {
      case ExprKind::kIntImm:
        Put(absl::StrCat(e->int_value));
        return;
      case ExprKind::kFloatImm:
        Put(absl::StrCat(e->float_value, "f"));
        return;
      case ExprKind::kVar:
        Put(e->var->name);
        return;
      case ExprKind::kLoad:
        Put(absl::StrCat("b", e->buffer, "["));
        for (size_t i = 0; i < e->operands.size(); ++i) {
          if (i > 0) Put(", ");
          operand(static_cast<int>(i));
        }
        Put("]");
        return;
      case ExprKind::kBinary: {
        const BinaryOp op = e->binary_op();
        if (op == BinaryOp::kMin || op == BinaryOp::kMax || op == BinaryOp::kPow) {
          Put(absl::StrCat(BinaryName(op), "("));
          operand(0);
          Put(", ");
          operand(1);
          Put(")");
          return;
        }
        Put("(");
        operand(0);
        Put(absl::StrCat(" ", BinaryName(op), " "));
        operand(1);
        Put(")");
        return;
      }
      case ExprKind::kUnary:
        Put(absl::StrCat(UnaryName(e->unary_op()), "("));
        operand(0);
        Put(")");
        return;
      case ExprKind::kCompare:
        Put("(");
        operand(0);
        Put(absl::StrCat(" ", CompareName(e->compare_op()), " "));
        operand(1);
        Put(")");
        return;
      case ExprKind::kSelect:
        Put("select(");
        operand(0);
        Put(", ");
        operand(1);
        Put(", ");
        operand(2);
        Put(")");
        return;
      case ExprKind::kCast:
        Put(absl::StrCat(ScalarTypeName(e->type), "("));
        operand(0);
        Put(")");
        return;
      case ExprKind::kReduce: {
        std::vector<std::string> vars;
        for (const Var& v : e->reduce_vars) vars.push_back(absl::StrCat(v->name, "<", v->extent));
        Put(absl::StrCat(ReduceName(e->reduce_op()), "[", absl::StrJoin(vars, ", "), "]("));
        operand(0);
        Put(")");
        return;
      }
    }
    Put("?");
  }

  std::string Take() { return std::move(out_); }

 private:
  void Put(absl::string_view text) {
    if (cut_) return;
    if (out_.size() + text.size() > limit_) {
      out_.append(text.data(), limit_ - out_.size());
      out_ += "...";
      cut_ = true;
      return;
    }
    out_.append(text.data(), text.size());
  }

  size_t limit_;
  bool cut_ = false;
  std::string out_;
};

}  // namespace

std::string ExprToString(const Expr& e, size_t limit) {
  LimitedPrinter printer(limit);
  printer.Print(e);
  return printer.Take();
}

}  // namespace kiln::te
