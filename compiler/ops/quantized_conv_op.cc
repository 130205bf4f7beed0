// qconv2d_u8s8: a QDQ conv's integer products (compiler/passes/
// integer_qdq_conv.cc makes it). Lowering hands it to the runtime's
// kiln_qconv_u8s8 (compiler/lower/qconv_call.cc); the compute below states
// the same value for every other path and for readers.
//   inputs: x uint8 (N, C, H, W); w int8 (O, KP): each output channel's
//           C * KH * KW weights in (c, ky, kx) order, zero-padded to KP, a
//           multiple of 4 (kiln_qconv_u8s8's packing); correction int32 (O);
//           scale and bias float32 (O); x_zero uint8 scalar, the value
//           outside x.
//   attrs:  Pool2DAttrs' kernel, strides, padding and dilation (the window).
//   output: float32 (N, O, OH, OW) =
//           (sum over the window of w * x + correction[o]) * scale[o] + bias[o].
// With correction = -x_zero * the row's sum this is scale * sum (x - x_zero) * w.
// A seventh operand, requant float64 (6), makes the op requantise (compiler/
// passes/requantize_in_kernel.cc; kiln_qconv_u8s8_q8): scale and bias are
// then float64 and the output uint8, as compiler/ops/requantize_expr.h says.
#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/ops/requantize_expr.h"
#include "compiler/ops/shape_relations.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

using te::ComputeContext;
using te::Expr;

constexpr int64_t kGroup = 4;  // abi::kQConvKGroup

absl::StatusOr<Attrs> ParseQConv(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"kernel", "strides", "padding", "dilation"}));
  Pool2DAttrs a;
  KILN_ASSIGN_OR_RETURN(a.kernel, GetIntsAttr(raw, "kernel", {}));
  KILN_ASSIGN_OR_RETURN(a.strides, GetIntsAttr(raw, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.padding, GetIntsAttr(raw, "padding", {0, 0, 0, 0}));
  KILN_ASSIGN_OR_RETURN(a.dilation, GetIntsAttr(raw, "dilation", {1, 1}));
  bool ok = a.kernel.size() == 2 && a.strides.size() == 2 && a.padding.size() == 4 &&
            a.dilation.size() == 2;
  for (size_t i = 0; ok && i < 2; ++i) {
    ok = a.kernel[i] >= 1 && a.strides[i] >= 1 && a.dilation[i] >= 1;
  }
  for (int64_t p : a.padding) ok = ok && p >= 0;
  if (!ok) {
    return absl::InvalidArgumentError(
        "qconv2d_u8s8 wants kernel[2], strides[2], dilation[2] (all >= 1) and padding[4] >= 0");
  }
  return Attrs(a);
}

absl::StatusOr<TensorType> QConvRelation(const std::vector<TensorType>& in, const Attrs& attrs) {
  const Pool2DAttrs& a = std::get<Pool2DAttrs>(attrs);
  const TensorType &x = in[0], &w = in[1], &corr = in[2], &scale = in[3], &bias = in[4],
                   &zero = in[5];
  const bool requant = in.size() == 7;
  const DType epilogue = requant ? DType::kFloat64 : DType::kFloat32;
  const bool types_ok =
      x.dtype == DType::kUInt8 && w.dtype == DType::kInt8 && corr.dtype == DType::kInt32 &&
      scale.dtype == epilogue && bias.dtype == epilogue && zero.dtype == DType::kUInt8 &&
      (!requant || (in[6].dtype == DType::kFloat64 &&
                    in[6].shape == std::vector<int64_t>{abi::kRequantValues}));
  if (!types_ok || x.rank() != 4 || w.rank() != 2 || corr.shape != std::vector{w.shape[0]} ||
      scale.shape != corr.shape || bias.shape != corr.shape || zero.rank() != 0 ||
      a.kernel.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qconv2d_u8s8 wants uint8 x (N,C,H,W), int8 w (O,KP), int32 correction (O), float32 "
        "scale and bias (O) and a uint8 scalar zero point, or float64 scale and bias and a "
        "float64 requant (6) after it; got ",
        x.ToString(), ", ", w.ToString(), ", ", corr.ToString(), ", ", scale.ToString(), ", ",
        bias.ToString(), ", ", zero.ToString()));
  }
  const int64_t k = x.shape[1] * a.kernel[0] * a.kernel[1];
  if (w.shape[1] != (k + kGroup - 1) / kGroup * kGroup) {
    return absl::InvalidArgumentError(absl::StrCat("qconv2d_u8s8 weight rows of ", w.shape[1],
                                                   " for a window of ", k, " values"));
  }
  std::vector<int64_t> out{x.shape[0], w.shape[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    KILN_ASSIGN_OR_RETURN(
        out[2 + d], ConvOutputExtent("qconv2d_u8s8", x.shape[2 + d], a.padding[d], a.padding[d + 2],
                                     a.kernel[d], a.dilation[d], a.strides[d]));
  }
  return TensorType{requant ? DType::kUInt8 : DType::kFloat32, out};
}

Expr QConvCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const Pool2DAttrs& a = ctx.attrs<Pool2DAttrs>();
  const std::vector<int64_t>& xs = ctx.input_type(0).shape;
  te::Var c = ctx.ReduceVar("rc", xs[1]);
  te::Var ky = ctx.ReduceVar("ry", a.kernel[0]);
  te::Var kx = ctx.ReduceVar("rx", a.kernel[1]);
  const std::vector<Expr>& o = ctx.out();
  Expr y = b.Sub(b.Add(b.Mul(o[2], b.Int(a.strides[0])), b.Mul(b.Ref(ky), b.Int(a.dilation[0]))),
                 b.Int(a.padding[0]));
  Expr x = b.Sub(b.Add(b.Mul(o[3], b.Int(a.strides[1])), b.Mul(b.Ref(kx), b.Int(a.dilation[1]))),
                 b.Int(a.padding[1]));
  Expr inside = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
  Expr value = ctx.Input(0, {o[0], b.Ref(c), b.ClampIndex(y, xs[2]), b.ClampIndex(x, xs[3])});
  Expr data = b.Cast(te::ScalarType::kF32, b.Select(inside, value, ctx.Input(5, {})));
  Expr k = b.Add(b.Mul(b.Add(b.Mul(b.Ref(c), b.Int(a.kernel[0])), b.Ref(ky)), b.Int(a.kernel[1])),
                 b.Ref(kx));
  if (ctx.num_inputs() == 7) {  // exact in int64, then requantised
    Expr sum = b.Reduce(te::ReduceOp::kSum, {c, ky, kx},
                        b.Mul(b.Cast(te::ScalarType::kI64, b.Select(inside, value, ctx.Input(5, {}))),
                              b.Cast(te::ScalarType::kI64, ctx.Input(1, {o[1], k}))));
    sum = b.Add(sum, b.Cast(te::ScalarType::kI64, ctx.Input(2, {o[1]})));
    return RequantizeExpr(ctx, sum, ctx.Input(3, {o[1]}), ctx.Input(4, {o[1]}), 6);
  }
  Expr weight = b.Cast(te::ScalarType::kF32, ctx.Input(1, {o[1], k}));
  Expr sum = b.Reduce(te::ReduceOp::kSum, {c, ky, kx}, b.Mul(data, weight));
  sum = b.Add(sum, b.Cast(te::ScalarType::kF32, ctx.Input(2, {o[1]})));
  return b.Add(b.Mul(sum, ctx.Input(3, {o[1]})), ctx.Input(4, {o[1]}));
}

}  // namespace

void RegisterQuantizedConvOp(OpRegistry& r) {
  OpDef def;
  def.name = "qconv2d_u8s8";
  def.pattern = OpPattern::kOpaque;
  def.min_inputs = 6;
  def.max_inputs = 7;
  def.summary = "a QDQ conv's uint8 x int8 products in int32, scaled per channel (float32)";
  def.parse_attrs = ParseQConv;
  def.infer_type = QConvRelation;
  def.compute = QConvCompute;
  def.flops = [](const std::vector<TensorType>& in, const TensorType& out, const Attrs& attrs) {
    const Pool2DAttrs& a = std::get<Pool2DAttrs>(attrs);
    return 2.0 * static_cast<double>(out.NumElements()) *
           static_cast<double>(in[0].shape[1] * a.kernel[0] * a.kernel[1]);
  };
  r.Register(std::move(def));
}

}  // namespace kiln
