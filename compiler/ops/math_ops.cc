// Trigonometric, hyperbolic and rounding functions, further activations, and
// the logical and remainder ops. Most are compositions of a few primitives
// (sin, cos, atan, exp, log, sqrt, floor, round-half-even) so that fusion and
// vectorisation see ordinary elementwise expressions.
#include <cmath>
#include <string>

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
using te::CompareOp;
using te::ComputeContext;
using te::Expr;
using te::ExprBuilder;
using te::UnaryOp;

Expr Sqrt(ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kSqrt, std::move(x)); }
Expr Log(ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kLog, std::move(x)); }
Expr Exp(ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kExp, std::move(x)); }
Expr Atan(ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kAtan, std::move(x)); }
Expr Abs(ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kAbs, std::move(x)); }
Expr Lt(ExprBuilder& b, Expr x, Expr y) { return b.Compare(CompareOp::kLT, x, y); }
Expr Gt(ExprBuilder& b, Expr x, Expr y) { return b.Compare(CompareOp::kGT, x, y); }

void RegisterTrigonometry(OpRegistry& r) {
  auto unary = [&r](const char* name, const char* summary,
                    std::function<Expr(ExprBuilder&, Expr)> f) {
    RegisterUnary(r, name, summary, /*float_only=*/true,
                  [f](ComputeContext& c, Expr x) { return f(c.b(), x); });
  };
  unary("sin", "sine", [](ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kSin, x); });
  unary("cos", "cosine", [](ExprBuilder& b, Expr x) { return b.Unary(UnaryOp::kCos, x); });
  unary("tan", "tangent", [](ExprBuilder& b, Expr x) {
    return b.Div(b.Unary(UnaryOp::kSin, x), b.Unary(UnaryOp::kCos, x));
  });
  unary("atan", "arc tangent", [](ExprBuilder& b, Expr x) { return Atan(b, x); });
  // Half-angle forms: no cancellation near |x| = 1, and exact at +-1.
  unary("asin", "arc sine: 2 atan(x / (1 + sqrt((1 - x)(1 + x))))", [](ExprBuilder& b, Expr x) {
    Expr root = Sqrt(b, b.Mul(b.Sub(b.Float(1), x), b.Add(b.Float(1), x)));
    return b.Mul(b.Float(2), Atan(b, b.Div(x, b.Add(b.Float(1), root))));
  });
  unary("acos", "arc cosine: 2 atan(sqrt((1 - x) / (1 + x)))", [](ExprBuilder& b, Expr x) {
    return b.Mul(b.Float(2), Atan(b, Sqrt(b, b.Div(b.Sub(b.Float(1), x), b.Add(b.Float(1), x)))));
  });
  unary("sinh", "hyperbolic sine", [](ExprBuilder& b, Expr x) {
    return b.Mul(b.Float(0.5), b.Sub(Exp(b, x), Exp(b, b.Unary(UnaryOp::kNeg, x))));
  });
  unary("cosh", "hyperbolic cosine", [](ExprBuilder& b, Expr x) {
    return b.Mul(b.Float(0.5), b.Add(Exp(b, x), Exp(b, b.Unary(UnaryOp::kNeg, x))));
  });
  unary("asinh", "inverse hyperbolic sine", [](ExprBuilder& b, Expr x) {
    // Odd: computed on |x| (no cancellation for negative x), sign put back.
    Expr a = Abs(b, x);
    Expr y = Log(b, b.Add(a, Sqrt(b, b.Add(b.Mul(a, a), b.Float(1)))));
    return b.Select(Lt(b, x, b.Float(0)), b.Unary(UnaryOp::kNeg, y), y);
  });
  unary("acosh", "inverse hyperbolic cosine", [](ExprBuilder& b, Expr x) {
    return Log(b, b.Add(x, Sqrt(b, b.Mul(b.Sub(x, b.Float(1)), b.Add(x, b.Float(1))))));
  });
  unary("atanh", "inverse hyperbolic tangent", [](ExprBuilder& b, Expr x) {
    return b.Mul(b.Float(0.5), Log(b, b.Div(b.Add(b.Float(1), x), b.Sub(b.Float(1), x))));
  });
  unary("round", "round half to even", [](ExprBuilder& b, Expr x) {
    return b.Unary(UnaryOp::kRound, x);
  });
  unary("ceil", "round up", [](ExprBuilder& b, Expr x) {
    return b.Unary(UnaryOp::kNeg, b.Unary(UnaryOp::kFloor, b.Unary(UnaryOp::kNeg, x)));
  });
  unary("softplus", "log(1 + exp(x)), without overflow", [](ExprBuilder& b, Expr x) {
    return b.Add(b.Max(x, b.Float(0)),
                 Log(b, b.Add(b.Float(1), Exp(b, b.Unary(UnaryOp::kNeg, Abs(b, x))))));
  });
  unary("softsign", "x / (1 + |x|)", [](ExprBuilder& b, Expr x) {
    return b.Div(x, b.Add(b.Float(1), Abs(b, x)));
  });
  RegisterUnary(r, "sign", "-1, 0 or 1 by the sign of x (NaN stays NaN)", /*float_only=*/false,
                [](ComputeContext& c, Expr x) {
                  ExprBuilder& b = c.b();
                  const te::ScalarType t = x->type;
                  Expr zero = b.Constant(t, 0);
                  return b.Select(Gt(b, x, zero), b.Constant(t, 1),
                                  b.Select(Lt(b, x, zero), b.Constant(t, -1),
                                           te::IsFloat(t) ? x : zero));
                });
}

void RegisterActivations(OpRegistry& r) {
  RegisterActivation(r, "elu", "x if x >= 0, else alpha (exp(x) - 1)", "alpha", 1.0f, "", 0,
                     [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       ExprBuilder& b = c.b();
                       return b.Select(Lt(b, x, b.Float(0)),
                                       b.Mul(b.Float(a.alpha), b.Sub(Exp(b, x), b.Float(1))), x);
                     });
  RegisterActivation(r, "selu", "gamma (x if x > 0, else alpha (exp(x) - 1))", "alpha",
                     1.67326319217681884765625f, "gamma", 1.05070102214813232421875f,
                     [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       ExprBuilder& b = c.b();
                       Expr neg = b.Mul(b.Float(a.alpha), b.Sub(Exp(b, x), b.Float(1)));
                       return b.Mul(b.Float(a.beta), b.Select(Gt(b, x, b.Float(0)), x, neg));
                     });
  RegisterActivation(r, "celu", "max(0, x) + min(0, alpha (exp(x / alpha) - 1))", "alpha", 1.0f,
                     "", 0, [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       ExprBuilder& b = c.b();
                       Expr e = b.Sub(Exp(b, b.Div(x, b.Float(a.alpha))), b.Float(1));
                       return b.Add(b.Max(x, b.Float(0)),
                                    b.Min(b.Float(0), b.Mul(b.Float(a.alpha), e)));
                     });
  RegisterActivation(r, "thresholded_relu", "x if x > alpha, else 0", "alpha", 1.0f, "", 0,
                     [](ComputeContext& c, Expr x, const ActivationAttrs& a) {
                       ExprBuilder& b = c.b();
                       return b.Select(Gt(b, x, b.Float(a.alpha)), x, b.Float(0));
                     });
}

// A bool-valued elementwise op over one float input.
void RegisterFloatTest(OpRegistry& r, const char* name, const char* summary,
                       std::function<absl::StatusOr<Attrs>(const RawAttrs&)> parse,
                       std::function<Expr(ComputeContext&, Expr)> f) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kElemWise;
  def.summary = summary;
  def.parse_attrs = std::move(parse);
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs&) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireFloat(in));
    return TensorType{DType::kBool, in[0].shape};
  };
  def.compute = [f](ComputeContext& ctx) { return f(ctx, ctx.Input(0, ctx.out())); };
  r.Register(std::move(def));
}

void RegisterTests(OpRegistry& r) {
  RegisterFloatTest(r, "is_nan", "x is NaN", ParseNoAttrs, [](ComputeContext& c, Expr x) {
    return c.b().Compare(CompareOp::kNE, x, x);  // unordered: true only for NaN
  });
  // is_inf: alpha = detect positive infinity, beta = detect negative (1 or 0).
  RegisterFloatTest(
      r, "is_inf", "x is an infinity (attributes detect_positive, detect_negative: 0 or 1)",
      [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
        KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"detect_positive", "detect_negative"}));
        KILN_ASSIGN_OR_RETURN(int64_t positive, GetIntAttr(raw, "detect_positive", 1));
        KILN_ASSIGN_OR_RETURN(int64_t negative, GetIntAttr(raw, "detect_negative", 1));
        return Attrs(ActivationAttrs{positive != 0 ? 1.0f : 0.0f, negative != 0 ? 1.0f : 0.0f});
      },
      [](ComputeContext& c, Expr x) {
        ExprBuilder& b = c.b();
        const ActivationAttrs& a = c.attrs<ActivationAttrs>();
        Expr positive = b.Compare(CompareOp::kEQ, x, b.Float(INFINITY));
        Expr negative = b.Compare(CompareOp::kEQ, x, b.Float(-INFINITY));
        if (a.alpha != 0 && a.beta != 0) return b.Binary(BinaryOp::kOr, positive, negative);
        if (a.alpha != 0) return positive;
        if (a.beta != 0) return negative;
        return b.Bool(false);
      });
}

// Logical ops over bool tensors, NumPy-broadcast.
void RegisterLogical(OpRegistry& r) {
  auto relation = [](const std::vector<TensorType>& in,
                     const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireDType(in, DType::kBool));
    if (in.size() == 1) return in[0];
    return BroadcastRelation(in, attrs);
  };
  auto binary = [&](const char* name, const char* summary,
                    std::function<Expr(ExprBuilder&, Expr, Expr)> f) {
    OpDef def;
    def.name = name;
    def.pattern = OpPattern::kBroadcast;
    def.min_inputs = def.max_inputs = 2;
    def.summary = summary;
    def.parse_attrs = ParseNoAttrs;
    def.infer_type = relation;
    def.compute = [f](ComputeContext& ctx) {
      return f(ctx.b(), ctx.BroadcastInput(0), ctx.BroadcastInput(1));
    };
    r.Register(std::move(def));
  };
  binary("logical_and", "a and b (bool)",
         [](ExprBuilder& b, Expr x, Expr y) { return b.Binary(BinaryOp::kAnd, x, y); });
  binary("logical_or", "a or b (bool)",
         [](ExprBuilder& b, Expr x, Expr y) { return b.Binary(BinaryOp::kOr, x, y); });
  binary("logical_xor", "a xor b (bool)",
         [](ExprBuilder& b, Expr x, Expr y) { return b.Compare(CompareOp::kNE, x, y); });
  OpDef logical_not;
  logical_not.name = "logical_not";
  logical_not.pattern = OpPattern::kElemWise;
  logical_not.summary = "not x (bool)";
  logical_not.parse_attrs = ParseNoAttrs;
  logical_not.infer_type = relation;
  logical_not.compute = [](ComputeContext& ctx) {
    return ctx.b().Unary(UnaryOp::kNot, ctx.Input(0, ctx.out()));
  };
  r.Register(std::move(logical_not));
}

// mod: the remainder with the sign of the divisor (Python's %), or with
// attribute fmod = 1 the sign of the dividend (C's fmod, the only one ONNX
// allows for floats). An integer divisor of 0 gives 0, never a fault.
void RegisterMod(OpRegistry& r) {
  OpDef def;
  def.name = "mod";
  def.pattern = OpPattern::kBroadcast;
  def.min_inputs = def.max_inputs = 2;
  def.summary = "remainder, sign of the divisor (fmod = 1: of the dividend)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"fmod"}));
    KILN_ASSIGN_OR_RETURN(int64_t fmod, GetIntAttr(raw, "fmod", 0));
    if (fmod != 0 && fmod != 1) return absl::InvalidArgumentError("mod: fmod must be 0 or 1");
    return Attrs(ModAttrs{fmod == 1});
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    if (in[0].dtype == DType::kBool) return absl::InvalidArgumentError("mod of bool tensors");
    if (in[0].dtype == DType::kFloat32 && !std::get<ModAttrs>(attrs).fmod) {
      return absl::InvalidArgumentError("mod of floats needs fmod = 1 (as ONNX requires)");
    }
    return BroadcastRelation(in, attrs);
  };
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    Expr x = ctx.BroadcastInput(0), y = ctx.BroadcastInput(1);
    Expr rem = b.Mod(x, y);  // the sign of x, as C's % and fmod
    if (ctx.attrs<ModAttrs>().fmod) return rem;
    const te::ScalarType t = x->type;
    Expr zero = b.Constant(t, 0);
    // Python's %: move a non-zero remainder whose sign differs from y's.
    Expr differs = b.Compare(CompareOp::kNE, Lt(b, rem, zero), Lt(b, y, zero));
    Expr fix = b.Binary(BinaryOp::kAnd, b.Compare(CompareOp::kNE, rem, zero), differs);
    return b.Select(fix, b.Add(rem, y), rem);
  };
  r.Register(std::move(def));
}

}  // namespace

void RegisterMathOps(OpRegistry& r) {
  RegisterTrigonometry(r);
  RegisterActivations(r);
  RegisterTests(r);
  RegisterLogical(r);
  RegisterMod(r);
}

}  // namespace kiln
