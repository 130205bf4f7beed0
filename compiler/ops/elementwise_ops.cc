// Elementwise and broadcasting arithmetic: one table row per op.
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
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

absl::StatusOr<TensorType> BroadcastRelation(const std::vector<TensorType>& in, const Attrs&) {
  if (in[0].dtype != in[1].dtype) {
    return absl::InvalidArgumentError(absl::StrCat("operand dtypes differ: ",
                                                   in[0].ToString(), " vs ", in[1].ToString()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, BroadcastShapes(in[0].shape, in[1].shape));
  return TensorType{in[0].dtype, std::move(shape)};
}

absl::StatusOr<TensorType> SameFloatRelation(const std::vector<TensorType>& in, const Attrs&) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  return in[0];
}

absl::StatusOr<TensorType> SameNumericRelation(const std::vector<TensorType>& in,
                                               const Attrs&) {
  if (in[0].dtype == DType::kBool) {
    return absl::InvalidArgumentError("bool tensors are not supported here");
  }
  return in[0];
}

void RegisterBinary(OpRegistry& r, const char* name, BinaryOp op, const char* summary) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kBroadcast;
  def.min_inputs = def.max_inputs = 2;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = BroadcastRelation;
  def.compute = [op](ComputeContext& ctx) {
    return ctx.b().Binary(op, ctx.BroadcastInput(0), ctx.BroadcastInput(1));
  };
  r.Register(std::move(def));
}

void RegisterUnary(OpRegistry& r, const char* name, const char* summary, bool float_only,
                   std::function<Expr(ComputeContext&, Expr)> f) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kElemWise;
  def.min_inputs = def.max_inputs = 1;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = float_only ? SameFloatRelation : SameNumericRelation;
  def.compute = [f](ComputeContext& ctx) { return f(ctx, ctx.Input(0, ctx.out())); };
  r.Register(std::move(def));
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
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
