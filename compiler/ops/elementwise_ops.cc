// Elementwise and broadcasting arithmetic: one table row per op.
#include <cmath>
#include <functional>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/elementwise_registration.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/ops/shape_relations.h"
#include "compiler/te/compute_context.h"

namespace kiln {
namespace {

using te::BinaryOp;
using te::ComputeContext;
using te::Expr;
using te::UnaryOp;

// Inside a kernel a uint64 is an int64's bits, so a plain conversion reads
// 2^63 and up as negative. Its two 32-bit halves convert exactly, and their
// sum rounds once, as a direct unsigned conversion does.
Expr UInt64ToDouble(te::ExprBuilder& b, Expr x) {
  Expr high = b.Binary(BinaryOp::kShr, x, b.Int(32));
  Expr low = b.Sub(x, b.Binary(BinaryOp::kShl, high, b.Int(32)));
  const auto f64 = te::ScalarType::kF64;
  return b.Add(b.Mul(b.Cast(f64, high), b.Cast(f64, b.Int(int64_t{1} << 32))), b.Cast(f64, low));
}

// A float to uint64: [2^63, 2^64) is taken down by 2^63 (exactly: the two
// are within a factor of two), converted, and the top bit set back; past
// 2^64 it saturates to 2^64 - 1, as int64 conversion saturates.
Expr FloatToUInt64(te::ExprBuilder& b, Expr x) {
  const te::ScalarType type = x->type;
  Expr two63 = b.Float(9223372036854775808.0);  // a power of two: exact in float32
  if (type == te::ScalarType::kF64) two63 = b.Cast(type, two63);
  Expr high = b.Add(b.Cast(te::ScalarType::kI64, b.Sub(x, two63)),
                    b.Int(std::numeric_limits<int64_t>::min()));
  return b.Select(b.Compare(te::CompareOp::kGE, x, two63), high,
                  b.Cast(te::ScalarType::kI64, x));
}

void RegisterWhereAndCast(OpRegistry& r) {
  OpDef where;
  where.name = "where";
  where.pattern = OpPattern::kBroadcast;
  where.min_inputs = where.max_inputs = 3;
  where.summary = "cond ? a : b with NumPy broadcasting";
  where.parse_attrs = ParseNoAttrs;
  where.infer_type = [](const std::vector<TensorType>& in,
                        const Attrs&) -> absl::StatusOr<TensorType> {
    if (in[0].dtype != DType::kBool) {
      return absl::InvalidArgumentError("where's condition must be bool");
    }
    if (in[1].dtype != in[2].dtype) return absl::InvalidArgumentError("where's branches differ");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> s, BroadcastShapes(in[0].shape, in[1].shape));
    KILN_ASSIGN_OR_RETURN(s, BroadcastShapes(s, in[2].shape));
    return TensorType{in[1].dtype, s};
  };
  where.compute = [](ComputeContext& ctx) {
    return ctx.b().Select(ctx.BroadcastInput(0), ctx.BroadcastInput(1), ctx.BroadcastInput(2));
  };
  r.Register(std::move(where));

  OpDef cast;
  cast.name = "cast";
  cast.pattern = OpPattern::kElemWise;
  cast.summary =
      "element type conversion (attribute `to`: a dtype name: float32, float16, int8, bool, ...)";
  cast.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"to"}));
    auto it = raw.find("to");
    const std::string* to = it == raw.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (to == nullptr) return absl::InvalidArgumentError("cast needs `to` (a dtype name)");
    if (std::optional<DType> dtype = DTypeFromName(*to)) return Attrs(CastAttrs{*dtype});
    return absl::InvalidArgumentError(absl::StrCat("cannot cast to '", *to, "'"));
  };
  cast.infer_type = [](const std::vector<TensorType>& in,
                       const Attrs& attrs) -> absl::StatusOr<TensorType> {
    return TensorType{std::get<CastAttrs>(attrs).to, in[0].shape};
  };
  cast.compute = [](ComputeContext& ctx) {
    const DType from = ctx.input_type(0).dtype;
    Expr x = ctx.Input(0, ctx.out());
    Expr y;
    if (from == DType::kUInt64 && IsFloatDType(ctx.output_type().dtype)) {
      y = ctx.b().Cast(ctx.out_scalar(), UInt64ToDouble(ctx.b(), x));
    } else if (IsFloatDType(from) && ctx.output_type().dtype == DType::kUInt64) {
      y = FloatToUInt64(ctx.b(), x);
    } else {
      y = ctx.b().Cast(ctx.out_scalar(), x);
    }
    // A cast to float16 or bfloat16 rounds even where it is fused and never
    // stored (the narrow integers wrap wherever they are inlined anyway).
    const DType to = ctx.output_type().dtype;
    if (to == DType::kFloat16 || to == DType::kBFloat16) y = ctx.b().Unary(*te::NarrowingOp(to), y);
    return y;
  };
  r.Register(std::move(cast));
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  RegisterBinary(r, "pow", BinaryOp::kPow, "a ** b with NumPy broadcasting");
  RegisterBinary(r, "minimum", BinaryOp::kMin, "min(a, b) with NumPy broadcasting");
  RegisterBinary(r, "maximum", BinaryOp::kMax, "max(a, b) with NumPy broadcasting");
  RegisterCompare(r, "equal", te::CompareOp::kEQ, "a == b (bool) with NumPy broadcasting");
  RegisterCompare(r, "less", te::CompareOp::kLT, "a < b (bool) with NumPy broadcasting");
  RegisterCompare(r, "greater", te::CompareOp::kGT, "a > b (bool) with NumPy broadcasting");
  RegisterCompare(r, "less_equal", te::CompareOp::kLE, "a <= b (bool) with NumPy broadcasting");
  RegisterCompare(r, "greater_equal", te::CompareOp::kGE,
                  "a >= b (bool) with NumPy broadcasting");
  RegisterWhereAndCast(r);
  RegisterUnary(r, "abs", "|x|", false,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kAbs, x); });
  RegisterUnary(r, "reciprocal", "1 / x", true,
                [](ComputeContext& c, Expr x) { return c.b().Div(c.b().Float(1), x); });
  RegisterUnary(r, "erf", "the error function", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kErf, x); });
  RegisterUnary(r, "floor", "round down", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kFloor, x); });
  RegisterUnary(r, "hard_swish", "x * clamp(x / 6 + 0.5, 0, 1)", true,
                [](ComputeContext& c, Expr x) {
                  te::ExprBuilder& b = c.b();
                  Expr gate = b.Min(b.Max(b.Add(b.Mul(x, b.Float(1.0 / 6)), b.Float(0.5)),
                                          b.Float(0)), b.Float(1));
                  return b.Mul(x, gate);
                });
  RegisterActivation(r, "leaky_relu", "x if x >= 0 else alpha * x", "alpha", 0.01f, "", 0,
                     [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       te::ExprBuilder& b = c.b();
                       return b.Select(b.Compare(te::CompareOp::kGE, x, b.Float(0)), x,
                                       b.Mul(x, b.Float(a.alpha)));
                     });
  RegisterActivation(r, "clip", "clamp(x, min, max)", "min", -INFINITY, "max", INFINITY,
                     [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       te::ExprBuilder& b = c.b();
                       return b.Min(b.Max(x, b.Float(a.alpha)), b.Float(a.beta));
                     });
  RegisterActivation(r, "hard_sigmoid", "clamp(alpha * x + beta, 0, 1)", "alpha", 0.2f, "beta",
                     0.5f, [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       te::ExprBuilder& b = c.b();
                       return b.Min(b.Max(b.Add(b.Mul(x, b.Float(a.alpha)), b.Float(a.beta)),
                                          b.Float(0)),
                                    b.Float(1));
                     });
  RegisterBinary(r, "add", BinaryOp::kAdd, "a + b with NumPy broadcasting");
  RegisterBinary(r, "sub", BinaryOp::kSub, "a - b with NumPy broadcasting");
  RegisterBinary(r, "mul", BinaryOp::kMul, "a * b with NumPy broadcasting");
  RegisterBinary(r, "div", BinaryOp::kDiv, "a / b with NumPy broadcasting");

  RegisterUnary(r, "relu", "max(x, 0)", false, [](ComputeContext& c, Expr x) {
    return c.b().Max(x, c.b().Constant(x->type, 0));
  });
  RegisterUnary(r, "sigmoid", "1 / (1 + exp(-x))", true, [](ComputeContext& c, Expr x) {
    te::ExprBuilder& b = c.b();
    return b.Div(b.Float(1), b.Add(b.Float(1), b.Unary(UnaryOp::kExp, b.Unary(UnaryOp::kNeg, x))));
  });
  RegisterUnary(r, "tanh", "hyperbolic tangent", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kTanh, x); });
  RegisterUnary(r, "exp", "e^x", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kExp, x); });
  RegisterUnary(r, "log", "natural logarithm", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kLog, x); });
  RegisterUnary(r, "sqrt", "square root", true,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kSqrt, x); });
  RegisterUnary(r, "neg", "-x", false,
                [](ComputeContext& c, Expr x) { return c.b().Unary(UnaryOp::kNeg, x); });
}

}  // namespace kiln
