#include "compiler/te/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/half_float.h"
#include "common/status_macros.h"
#include "compiler/ir/element_access.h"

namespace kiln::te {
namespace {

// Float values are held as double; f32 results are rounded to float after
// every operation, so folding rounds as the kernels do.
struct Scalar {
  int64_t i = 0;
  double f = 0;
};

double RoundTo(ScalarType t, double v) {
  return t == ScalarType::kF32 ? static_cast<double>(static_cast<float>(v)) : v;
}

template <typename T>
int64_t Wrap(int64_t v) {
  return static_cast<int64_t>(static_cast<T>(v));
}

int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t WrapNeg(int64_t a) { return static_cast<int64_t>(0 - static_cast<uint64_t>(a)); }

// `value`, unless `a` or `b` is NaN: min and max propagate NaN.
double NanOr(double a, double b, double value) {
  return std::isnan(a) ? a : std::isnan(b) ? b : value;
}

class Evaluator {
 public:
  explicit Evaluator(const std::vector<EvalBuffer>& buffers) : buffers_(buffers) {}

  void Bind(const VarNode* v, int64_t value) { vars_[v] = value; }

  Scalar Eval(const Expr& e) {
    Scalar r;
    switch (e->kind) {
      case ExprKind::kIntImm:
        r.i = e->int_value;
        return r;
      case ExprKind::kFloatImm:
        r.f = RoundTo(e->type, e->float_value);
        return r;
      case ExprKind::kVar:
        r.i = vars_.at(e->var.get());
        return r;
      case ExprKind::kLoad:
        return Load(e);
      case ExprKind::kBinary:
        return Binary(e);
      case ExprKind::kUnary:
        return Unary(e);
      case ExprKind::kCompare:
        return Compare(e);
      case ExprKind::kSelect: {
        Scalar c = Eval(e->operands[0]);
        return Eval(e->operands[c.i ? 1 : 2]);
      }
      case ExprKind::kCast:
        return Cast(e);
      case ExprKind::kReduce:
        return Reduce(e);
    }
    return r;
  }

 private:
  Scalar Load(const Expr& e) {
    const EvalBuffer& buf = buffers_[e->buffer];
    int64_t flat = 0;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      flat = flat * buf.shape[d] + Eval(e->operands[d]).i;
    }
    Scalar r;
    if (IsFloat(e->type)) {
      r.f = ReadElementAsDouble(buf.dtype, buf.data, flat);
    } else {
      r.i = ReadElementAsInt(buf.dtype, buf.data, flat);
    }
    return r;
  }

  Scalar Binary(const Expr& e) {
    Scalar a = Eval(e->operands[0]);
    Scalar b = Eval(e->operands[1]);
    Scalar r;
    if (IsFloat(e->type)) {
      switch (e->binary_op()) {
        case BinaryOp::kAdd: r.f = a.f + b.f; break;
        case BinaryOp::kSub: r.f = a.f - b.f; break;
        case BinaryOp::kMul: r.f = a.f * b.f; break;
        case BinaryOp::kDiv: r.f = a.f / b.f; break;
        case BinaryOp::kMod: r.f = std::fmod(a.f, b.f); break;
        // NaN in, NaN out, as the generated code does.
        case BinaryOp::kMin: r.f = NanOr(a.f, b.f, std::fmin(a.f, b.f)); break;
        case BinaryOp::kMax: r.f = NanOr(a.f, b.f, std::fmax(a.f, b.f)); break;
        case BinaryOp::kPow: r.f = std::pow(a.f, b.f); break;
        default: KILN_CHECK(false);
      }
      r.f = RoundTo(e->type, r.f);
      return r;
    }
    switch (e->binary_op()) {
      // As the kernels compute: wrapping, and x / 0, x % 0, x % -1 are 0,
      // x / -1 is -x (INT64_MIN / -1 would trap here as in a kernel).
      case BinaryOp::kAdd: r.i = WrapAdd(a.i, b.i); break;
      case BinaryOp::kSub: r.i = WrapAdd(a.i, WrapNeg(b.i)); break;
      case BinaryOp::kMul:
        r.i = static_cast<int64_t>(static_cast<uint64_t>(a.i) * static_cast<uint64_t>(b.i));
        break;
      case BinaryOp::kDiv: r.i = b.i == 0 ? 0 : b.i == -1 ? WrapNeg(a.i) : a.i / b.i; break;
      case BinaryOp::kMod: r.i = b.i == 0 || b.i == -1 ? 0 : a.i % b.i; break;
      case BinaryOp::kMin: r.i = std::min(a.i, b.i); break;
      case BinaryOp::kMax: r.i = std::max(a.i, b.i); break;
      case BinaryOp::kAnd: r.i = a.i && b.i; break;
      case BinaryOp::kOr: r.i = a.i || b.i; break;
      case BinaryOp::kShl:
        r.i = b.i < 0 || b.i >= 64 ? 0
                                   : static_cast<int64_t>(static_cast<uint64_t>(a.i) << b.i);
        break;
      case BinaryOp::kShr:
        r.i = b.i < 0 || b.i >= 64 ? 0
                                   : static_cast<int64_t>(static_cast<uint64_t>(a.i) >> b.i);
        break;
      case BinaryOp::kPow: {
        int64_t p = 1;
        for (int64_t k = 0; k < b.i; ++k) p *= a.i;
        r.i = p;
        break;
      }
    }
    return r;
  }

  Scalar Unary(const Expr& e) {
    Scalar a = Eval(e->operands[0]);
    Scalar r;
    if (!IsFloat(e->type)) {
      switch (e->unary_op()) {
        case UnaryOp::kNeg: r.i = WrapNeg(a.i); break;
        case UnaryOp::kAbs: r.i = a.i < 0 ? WrapNeg(a.i) : a.i; break;
        case UnaryOp::kNot: r.i = !a.i; break;
        case UnaryOp::kWrapI8: r.i = Wrap<int8_t>(a.i); break;
        case UnaryOp::kWrapU8: r.i = Wrap<uint8_t>(a.i); break;
        case UnaryOp::kWrapI16: r.i = Wrap<int16_t>(a.i); break;
        case UnaryOp::kWrapU16: r.i = Wrap<uint16_t>(a.i); break;
        case UnaryOp::kWrapI32: r.i = Wrap<int32_t>(a.i); break;
        case UnaryOp::kWrapU32: r.i = Wrap<uint32_t>(a.i); break;
        default: r.i = a.i;
      }
      return r;
    }
    switch (e->unary_op()) {
      case UnaryOp::kNeg: r.f = -a.f; break;
      case UnaryOp::kExp: r.f = std::exp(a.f); break;
      case UnaryOp::kLog: r.f = std::log(a.f); break;
      case UnaryOp::kSqrt: r.f = std::sqrt(a.f); break;
      case UnaryOp::kTanh: r.f = std::tanh(a.f); break;
      case UnaryOp::kAbs: r.f = std::fabs(a.f); break;
      case UnaryOp::kErf: r.f = std::erf(a.f); break;
      case UnaryOp::kFloor: r.f = std::floor(a.f); break;
      case UnaryOp::kSin: r.f = std::sin(a.f); break;
      case UnaryOp::kCos: r.f = std::cos(a.f); break;
      case UnaryOp::kAtan: r.f = std::atan(a.f); break;
      case UnaryOp::kRound: r.f = std::nearbyint(a.f); break;
      case UnaryOp::kNot: r.f = a.f == 0; break;
      case UnaryOp::kRoundF16: r.f = HalfToFloat(FloatToHalf(static_cast<float>(a.f))); break;
      case UnaryOp::kRoundBF16:
        r.f = BFloat16ToFloat(FloatToBFloat16(static_cast<float>(a.f)));
        break;
      default: r.f = a.f;
    }
    r.f = RoundTo(e->type, r.f);
    return r;
  }

  Scalar Compare(const Expr& e) {
    Scalar a = Eval(e->operands[0]);
    Scalar b = Eval(e->operands[1]);
    const bool is_float = IsFloat(e->operands[0]->type);
    auto cmp = [&](auto x, auto y) {
      switch (e->compare_op()) {
        case CompareOp::kLT: return x < y;
        case CompareOp::kLE: return x <= y;
        case CompareOp::kGT: return x > y;
        case CompareOp::kGE: return x >= y;
        case CompareOp::kEQ: return x == y;
        case CompareOp::kNE: return x != y;
      }
      return false;
    };
    Scalar r;
    r.i = is_float ? cmp(a.f, b.f) : cmp(a.i, b.i);
    return r;
  }

  Scalar Cast(const Expr& e) {
    const ScalarType from = e->operands[0]->type;
    Scalar a = Eval(e->operands[0]);
    Scalar r;
    if (IsFloat(e->type)) {
      r.f = RoundTo(e->type, IsFloat(from) ? a.f : static_cast<double>(a.i));
    } else if (e->type == ScalarType::kBool) {
      r.i = IsFloat(from) ? a.f != 0 : a.i != 0;
    } else if (IsFloat(from)) {
      // As ReadElementAsInt converts: NaN 0, beyond int64 saturated.
      WriteElementFromDouble(DType::kInt64, &r.i, 0, a.f);
    } else {
      r.i = a.i;
    }
    return r;
  }

  Scalar Reduce(const Expr& e) {
    const ScalarType t = e->type;
    Scalar acc;
    switch (e->reduce_op()) {
      case ReduceOp::kSum:
        break;
      case ReduceOp::kProd:
        acc.f = 1;
        acc.i = 1;
        break;
      case ReduceOp::kMax:
        acc.f = -std::numeric_limits<float>::infinity();
        acc.i = std::numeric_limits<int64_t>::min();
        break;
      case ReduceOp::kMin:
        acc.f = std::numeric_limits<float>::infinity();
        acc.i = std::numeric_limits<int64_t>::max();
        break;
    }
    const std::vector<Var>& rv = e->reduce_vars;
    std::vector<int64_t> idx(rv.size(), 0);
    for (const Var& v : rv) {
      if (v->extent == 0) return acc;
    }
    while (true) {
      for (size_t d = 0; d < rv.size(); ++d) Bind(rv[d].get(), idx[d]);
      Scalar x = Eval(e->operands[0]);
      switch (e->reduce_op()) {
        case ReduceOp::kSum:
          acc.f = RoundTo(t, acc.f + x.f);
          acc.i = WrapAdd(acc.i, x.i);
          break;
        case ReduceOp::kProd:
          acc.f = RoundTo(t, acc.f * x.f);
          acc.i = static_cast<int64_t>(static_cast<uint64_t>(acc.i) * static_cast<uint64_t>(x.i));
          break;
        case ReduceOp::kMax:
          acc.f = NanOr(acc.f, x.f, std::fmax(acc.f, x.f));
          acc.i = std::max(acc.i, x.i);
          break;
        case ReduceOp::kMin:
          acc.f = NanOr(acc.f, x.f, std::fmin(acc.f, x.f));
          acc.i = std::min(acc.i, x.i);
          break;
      }
      int d = static_cast<int>(rv.size()) - 1;
      while (d >= 0 && ++idx[d] == rv[d]->extent) idx[d--] = 0;
      if (d < 0) break;
    }
    return acc;
  }

  const std::vector<EvalBuffer>& buffers_;
  std::unordered_map<const VarNode*, int64_t> vars_;
};

}  // namespace

void EvaluateIntoBuffer(const Expr& value, const std::vector<Var>& out_vars,
                        const std::vector<int64_t>& out_shape,
                        const std::vector<EvalBuffer>& buffers, DType dtype, void* out) {
  Evaluator ev(buffers);
  int64_t total = 1;
  for (int64_t d : out_shape) total *= d;
  std::vector<int64_t> idx(out_shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    for (size_t d = 0; d < out_vars.size(); ++d) ev.Bind(out_vars[d].get(), idx[d]);
    Scalar s = ev.Eval(value);
    if (IsFloat(value->type)) {
      WriteElementFromDouble(dtype, out, flat, s.f);
    } else {
      WriteElementFromInt(dtype, out, flat, s.i);
    }
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace kiln::te
