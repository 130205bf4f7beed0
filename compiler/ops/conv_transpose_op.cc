// conv2d_transpose: the gradient of conv2d with respect to its data, as
// decoders and U-Nets upsample. Each output element sums the input elements
// whose strided window covers it:
//   y[n, o, oy, ox] = b[o] + sum_{c, ky, kx} x[n, g*C' + c, iy, ix] w[g*C' + c, o % O', ky, kx]
// where iy = (oy + pad_top - ky * dil) / stride when that divides exactly and
// lands inside the input (likewise ix); g = o / O' is the group.
// Attributes are conv2d's; a negative end padding is output padding (ONNX's
// output_padding adds that many rows or columns at the end).
#include <string>

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
using te::CompareOp;
using te::ComputeContext;
using te::Expr;

absl::StatusOr<Attrs> ParseConvTranspose(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(
      CheckKnownAttrs(raw, {"strides", "padding", "dilation", "groups", "output_padding"}));
  Conv2DAttrs a;
  KILN_ASSIGN_OR_RETURN(a.strides, GetIntsAttr(raw, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.padding, GetIntsAttr(raw, "padding", {0, 0, 0, 0}));
  KILN_ASSIGN_OR_RETURN(a.dilation, GetIntsAttr(raw, "dilation", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.groups, GetIntAttr(raw, "groups", 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> extra, GetIntsAttr(raw, "output_padding", {0, 0}));
  if (a.strides.size() != 2 || a.dilation.size() != 2 || a.padding.size() != 4 ||
      extra.size() != 2) {
    return absl::InvalidArgumentError(
        "conv2d_transpose wants strides[2], dilation[2], padding[4], output_padding[2]");
  }
  for (int d = 0; d < 2; ++d) {
    if (a.strides[d] < 1 || a.dilation[d] < 1) {
      return absl::InvalidArgumentError("conv2d_transpose strides and dilation must be >= 1");
    }
    if (a.padding[d] < 0 || a.padding[d + 2] < 0 || extra[d] < 0 ||
        extra[d] >= std::max(a.strides[d], a.dilation[d])) {
      return absl::InvalidArgumentError(
          "conv2d_transpose padding must be >= 0 and output_padding below the stride");
    }
    a.padding[d + 2] -= extra[d];
  }
  if (a.groups < 1) return absl::InvalidArgumentError("conv2d_transpose groups must be >= 1");
  return Attrs(a);
}

// data (N, C, H, W), weight (C, O/groups, KH, KW), optional bias (O).
absl::StatusOr<TensorType> ConvTransposeRelation(const std::vector<TensorType>& in,
                                                 const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 4 || w.rank() != 4 || w.shape[0] != x.shape[1] ||
      x.shape[1] % a.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d_transpose: data ", x.ToString(),
                                                   ", weight ", w.ToString(), ", groups ",
                                                   a.groups));
  }
  const int64_t out_channels = w.shape[1] * a.groups;
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != out_channels)) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d_transpose bias ", in[2].ToString(),
                                                   " must have shape [", out_channels, "]"));
  }
  std::vector<int64_t> out{x.shape[0], out_channels, 0, 0};
  for (int d = 0; d < 2; ++d) {
    out[2 + d] = (x.shape[2 + d] - 1) * a.strides[d] + a.dilation[d] * (w.shape[2 + d] - 1) + 1 -
                 a.padding[d] - a.padding[d + 2];
    if (out[2 + d] < 1) {
      return absl::InvalidArgumentError("conv2d_transpose: the padding leaves no output");
    }
  }
  return TensorType{DType::kFloat32, out};
}

Expr ConvTransposeCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const Conv2DAttrs& a = ctx.attrs<Conv2DAttrs>();
  const std::vector<int64_t>& xs = ctx.input_type(0).shape;
  const std::vector<int64_t>& ws = ctx.input_type(1).shape;
  const int64_t in_per_group = xs[1] / a.groups;
  const int64_t out_per_group = ws[1];
  te::Var c = ctx.ReduceVar("rc", in_per_group);
  te::Var ky = ctx.ReduceVar("ry", ws[2]);
  te::Var kx = ctx.ReduceVar("rx", ws[3]);
  const std::vector<Expr>& o = ctx.out();
  Expr channel = b.Add(b.Mul(b.Div(o[1], b.Int(out_per_group)), b.Int(in_per_group)), b.Ref(c));
  // The input index along one dim, and whether the output element reads it.
  auto source = [&](const Expr& out_index, const te::Var& k, int d, Expr* valid) {
    Expr t = b.Sub(b.Add(out_index, b.Int(a.padding[d])), b.Mul(b.Ref(k), b.Int(a.dilation[d])));
    Expr i = b.Div(t, b.Int(a.strides[d]));
    Expr ok = b.Compare(CompareOp::kGE, t, b.Int(0));
    if (a.strides[d] > 1) {
      ok = b.Binary(BinaryOp::kAnd, ok,
                    b.Compare(CompareOp::kEQ, b.Mod(t, b.Int(a.strides[d])), b.Int(0)));
    }
    ok = b.Binary(BinaryOp::kAnd, ok, b.Compare(CompareOp::kLT, i, b.Int(xs[2 + d])));
    *valid = ok;
    return b.ClampIndex(i, xs[2 + d]);
  };
  Expr valid_y, valid_x;
  Expr iy = source(o[2], ky, 0, &valid_y);
  Expr ix = source(o[3], kx, 1, &valid_x);
  Expr data = b.Select(b.Binary(BinaryOp::kAnd, valid_y, valid_x),
                       ctx.Input(0, {o[0], channel, iy, ix}), b.Float(0));
  Expr weight = ctx.Input(1, {channel, b.Mod(o[1], b.Int(out_per_group)), b.Ref(ky), b.Ref(kx)});
  Expr sum = b.Reduce(te::ReduceOp::kSum, {c, ky, kx}, b.Mul(data, weight));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {o[1]}));
  return sum;
}

// Each input element multiplies a (O/groups, KH, KW) slice of the weight into
// the output: 2*N*C*H*W * O/groups*KH*KW, plus one add per output for a bias.
double ConvTransposeFlops(const std::vector<TensorType>& in, const TensorType& out,
                          const Attrs&) {
  const std::vector<int64_t>& w = in[1].shape;
  return 2 * static_cast<double>(in[0].NumElements()) * static_cast<double>(w[1] * w[2] * w[3]) +
         (in.size() == 3 ? static_cast<double>(out.NumElements()) : 0);
}

}  // namespace

void RegisterConvTransposeOp(OpRegistry& r) {
  OpDef def;
  def.name = "conv2d_transpose";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary = "2-D transposed convolution, NCHW data, (C, O/groups, KH, KW) weight, bias";
  def.parse_attrs = ParseConvTranspose;
  def.infer_type = ConvTransposeRelation;
  def.compute = ConvTransposeCompute;
  def.flops = ConvTransposeFlops;
  r.Register(std::move(def));
}

}  // namespace kiln
