// Blocked-channel layouts (ConvertLayoutNchwc's ops): layout_transform between
// NCHW and NCHW{c}c, and conv2d_nchwc, a conv2d over NCHW{c}c data with its
// weight pre-packed as O/oc, C/c, KH, KW, c, oc (and its depthwise and
// grouped forms).
//
// In NCHW16c the 16 channels of one pixel are one 64-byte line: a conv's
// input is read one broadcast per channel from that line, and each output
// vector (16 channels of one pixel) is stored as a whole line. The blocked
// channel dim is padded up to a whole block with zeros, so every op that
// stays blocked must keep those lanes zero (or, like a conv, never read
// them through a non-zero weight).
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

using te::ComputeContext;
using te::Expr;

absl::StatusOr<Attrs> ParseLayoutTransform(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"src_block", "dst_block", "channels"}));
  LayoutTransformAttrs a;
  KILN_ASSIGN_OR_RETURN(a.src_block, GetIntAttr(raw, "src_block", 0));
  KILN_ASSIGN_OR_RETURN(a.dst_block, GetIntAttr(raw, "dst_block", 0));
  KILN_ASSIGN_OR_RETURN(a.channels, GetIntAttr(raw, "channels", 0));
  if (a.src_block < 0 || a.dst_block < 0 || a.channels < 0) {
    return absl::InvalidArgumentError("layout_transform blocks and channels must be >= 0");
  }
  if (a.src_block == a.dst_block) {
    return absl::InvalidArgumentError("layout_transform wants two different layouts");
  }
  if (a.src_block != 0 && a.channels == 0) {
    return absl::InvalidArgumentError("layout_transform from a blocked layout needs `channels`");
  }
  return Attrs(a);
}

// NCHW (block 0) or N, C/block, H, W, block.
std::vector<int64_t> LayoutShape(const std::vector<int64_t>& nchw, int64_t block) {
  if (block == 0) return nchw;
  return {nchw[0], (nchw[1] + block - 1) / block, nchw[2], nchw[3], block};
}

absl::StatusOr<TensorType> LayoutTransformRelation(const std::vector<TensorType>& in,
                                                   const Attrs& attrs) {
  const LayoutTransformAttrs& a = std::get<LayoutTransformAttrs>(attrs);
  const TensorType& x = in[0];
  const int64_t rank = a.src_block == 0 ? 4 : 5;
  if (x.rank() != rank || (a.src_block != 0 && x.shape[4] != a.src_block)) {
    return absl::InvalidArgumentError(absl::StrCat("layout_transform: input ", x.ToString(),
                                                   " is not in ", AttrsToString(attrs)));
  }
  const int64_t channels = a.src_block == 0 ? x.shape[1] : a.channels;
  if (a.src_block == 0 && a.channels != 0 && a.channels != channels) {
    return absl::InvalidArgumentError(absl::StrCat("layout_transform: input ", x.ToString(),
                                                   " has not ", a.channels, " channels"));
  }
  const std::vector<int64_t> nchw{x.shape[0], channels, x.shape[2], x.shape[3]};
  if (x.shape != LayoutShape(nchw, a.src_block)) {
    return absl::InvalidArgumentError(absl::StrCat("layout_transform: input ", x.ToString(),
                                                   " does not hold ", channels, " channels"));
  }
  return TensorType{x.dtype, LayoutShape(nchw, a.dst_block)};
}

// Output channel ch = o[1] (NCHW) or o[1] * block + o[4]; read at ch in the
// source layout, zero for the block padding past the channels.
Expr LayoutTransformCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const LayoutTransformAttrs& a = ctx.attrs<LayoutTransformAttrs>();
  const std::vector<Expr>& o = ctx.out();
  const std::vector<int64_t>& xs = ctx.input_type(0).shape;
  const int64_t channels = a.src_block == 0 ? xs[1] : a.channels;
  Expr ch = a.dst_block == 0 ? o[1] : b.Add(b.Mul(o[1], b.Int(a.dst_block)), o[4]);
  const bool padded = a.dst_block != 0 && channels % a.dst_block != 0;
  Expr read_ch = padded ? b.Min(ch, b.Int(channels - 1)) : ch;
  Expr value;
  if (a.src_block == 0) {
    value = ctx.Input(0, {o[0], read_ch, o[2], o[3]});
  } else {
    value = ctx.Input(0, {o[0], b.Div(read_ch, b.Int(a.src_block)), o[2], o[3],
                          b.Mod(read_ch, b.Int(a.src_block))});
  }
  if (!padded) return value;
  Expr inside = b.Compare(te::CompareOp::kLT, ch, b.Int(channels));
  return b.Select(inside, value, b.Constant(value->type, 0));
}

void RegisterLayoutTransform(OpRegistry& r) {
  OpDef def;
  def.name = "layout_transform";
  def.pattern = OpPattern::kInjective;
  def.summary =
      "NCHW <-> NCHW{c}c (attributes src_block, dst_block: 0 for "
      "NCHW; channels)";
  def.parse_attrs = ParseLayoutTransform;
  def.infer_type = LayoutTransformRelation;
  def.compute = LayoutTransformCompute;
  r.Register(std::move(def));
}

// conv2d_nchwc: data (N, C/c, H, W, c), weight (O/oc, C/c, KH, KW, c, oc),
// optional bias (O/oc, oc) -> (N, O/oc, OH, OW, oc). Groups 1, or groups =
// C/c = O/oc blocks apart: weight (O/oc, 1, KH, KW, c, oc), output block b
// reading input block b alone (a grouped conv whose groups each lie within
// one block, its weights block-diagonal in each c x oc matrix).
absl::StatusOr<TensorType> Conv2DNchwcRelation(const std::vector<TensorType>& in,
                                               const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  const bool blocks_apart = a.groups != 1;
  if (blocks_apart && (x.rank() != 5 || w.rank() != 6 || a.groups != x.shape[1] ||
                       a.groups != w.shape[0] || w.shape[1] != 1 || w.shape[4] != w.shape[5])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d_nchwc with groups wants one group per channel block: data (N, groups, H, W, c), "
        "weight (groups, 1, KH, KW, c, c), got ",
        x.ToString(), " and ", w.ToString(), " with groups ", a.groups));
  }
  if (x.rank() != 5 || w.rank() != 6 || (!blocks_apart && w.shape[1] != x.shape[1]) ||
      w.shape[4] != x.shape[4]) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d_nchwc wants data (N, C/c, H, W, c) and weight "
                     "(O/oc, C/c, KH, KW, "
                     "c, oc), got ",
                     x.ToString(), " and ", w.ToString()));
  }
  if (in.size() == 3 && in[2].shape != std::vector<int64_t>{w.shape[0], w.shape[5]}) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d_nchwc bias ", in[2].ToString(),
                                                   " must have shape [", w.shape[0], ", ",
                                                   w.shape[5], "]"));
  }
  std::vector<int64_t> out{x.shape[0], w.shape[0], 0, 0, w.shape[5]};
  for (int d = 0; d < 2; ++d) {
    KILN_ASSIGN_OR_RETURN(
        out[2 + d], ConvOutputExtent("conv2d_nchwc", x.shape[2 + d], a.padding[d], a.padding[d + 2],
                                     w.shape[2 + d], a.dilation[d], a.strides[d]));
  }
  return TensorType{DType::kFloat32, out};
}

// conv2d_nchwc_winograd_f2, _f3 and _f4: a conv2d_nchwc that WinogradConv
// chose to compute by Winograd's F(m x m, 3x3), m = 2, 3 or 4
// (lower/winograd_conv.cc). Its value is the conv's; it only admits what
// that lowering handles: groups 1, a 3x3 window at stride and dilation 1,
// and whole blocks of 16 channels in and out.
absl::StatusOr<TensorType> Conv2DNchwcWinogradRelation(const std::vector<TensorType>& in,
                                                       const Attrs& attrs) {
  KILN_ASSIGN_OR_RETURN(TensorType out, Conv2DNchwcRelation(in, attrs));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const std::vector<int64_t>& w = in[1].shape;
  if (a.groups != 1 || w[2] != 3 || w[3] != 3 || w[4] != 16 || w[5] != 16 || a.strides[0] != 1 ||
      a.strides[1] != 1 || a.dilation[0] != 1 || a.dilation[1] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d_nchwc_winograd wants groups 1, a 3x3 window at stride and dilation 1 and "
        "blocks of 16 channels, got weight ",
        in[1].ToString(), " with ", AttrsToString(attrs)));
  }
  return out;
}

// What a blocked conv's output (n, ., oh, ow, .) reads at window tap
// (ky, kx): data[n][block][oh*s + ky*d - p][ow*s + kx*d - p][lane], zero
// outside the input where the conv pads.
Expr WindowRead(ComputeContext& ctx, const Expr& ky, const Expr& kx, const Expr& block,
                const Expr& lane) {
  te::ExprBuilder& b = ctx.b();
  const Conv2DAttrs& a = ctx.attrs<Conv2DAttrs>();
  const std::vector<int64_t>& xs = ctx.input_type(0).shape;
  const std::vector<Expr>& o = ctx.out();
  Expr y = b.Sub(b.Add(b.Mul(o[2], b.Int(a.strides[0])), b.Mul(ky, b.Int(a.dilation[0]))),
                 b.Int(a.padding[0]));
  Expr x = b.Sub(b.Add(b.Mul(o[3], b.Int(a.strides[1])), b.Mul(kx, b.Int(a.dilation[1]))),
                 b.Int(a.padding[1]));
  const bool padded = a.padding[0] || a.padding[1] || a.padding[2] || a.padding[3];
  if (!padded) return ctx.Input(0, {o[0], block, y, x, lane});
  Expr cond = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
  return b.Select(
      cond, ctx.Input(0, {o[0], block, b.ClampIndex(y, xs[2]), b.ClampIndex(x, xs[3]), lane}),
      b.Float(0));
}

// The reduction runs over input channel blocks, window rows, window columns
// and, innermost, the channels of a block: one contiguous line of the input
// per pixel, which the contraction schedule broadcasts in place. With groups,
// the one input block is the output's.
Expr Conv2DNchwcCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const std::vector<int64_t>& ws = ctx.input_type(1).shape;
  te::Var cb = ctx.ReduceVar("rc", ws[1]);
  te::Var ky = ctx.ReduceVar("ry", ws[2]);
  te::Var kx = ctx.ReduceVar("rx", ws[3]);
  te::Var ci = ctx.ReduceVar("ri", ws[4]);
  const std::vector<Expr>& o = ctx.out();
  const bool blocks_apart = ctx.attrs<Conv2DAttrs>().groups != 1;
  Expr data = WindowRead(ctx, b.Ref(ky), b.Ref(kx), blocks_apart ? o[1] : b.Ref(cb), b.Ref(ci));
  Expr weight = ctx.Input(1, {o[1], b.Ref(cb), b.Ref(ky), b.Ref(kx), b.Ref(ci), o[4]});
  Expr sum = b.Reduce(te::ReduceOp::kSum, {cb, ky, kx, ci}, b.Mul(data, weight));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {o[1], o[4]}));
  return sum;
}

// As conv2d's: the window one output reduces over, the block padding included.
double Conv2DNchwcFlops(const std::vector<TensorType>& in, const TensorType& out, const Attrs&) {
  const std::vector<int64_t>& w = in[1].shape;
  const double outputs = static_cast<double>(out.NumElements());
  return 2 * outputs * static_cast<double>(w[1] * w[2] * w[3] * w[4]) +
         (in.size() == 3 ? outputs : 0);
}

// The multiply-adds F(m x m, 3x3) does: alpha^2 = (m + 2)^2 per m x m output
// tile per input and output channel, twice that in FLOPs, and the
// transforms' adds, about 2 alpha per input tile element and alpha per
// output tile element.
template <int kTile>
double Conv2DNchwcWinogradFlops(const std::vector<TensorType>& in, const TensorType& out,
                                const Attrs&) {
  constexpr double kAlpha = kTile + 2, kProducts = kAlpha * kAlpha;
  const std::vector<int64_t>& o = out.shape;
  const double tiles =
      static_cast<double>(o[0] * ((o[2] + kTile - 1) / kTile) * ((o[3] + kTile - 1) / kTile));
  const double c = static_cast<double>(in[1].shape[1] * in[1].shape[4]);
  const double k = static_cast<double>(o[1] * o[4]);
  return tiles * kProducts * (2 * c * k + 2 * kAlpha * c + kAlpha * k);
}

template <int kTile>
void RegisterConv2DNchwcWinograd(OpRegistry& r) {
  OpDef def;
  def.name = absl::StrCat("conv2d_nchwc_winograd_f", kTile);
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary = absl::StrCat(
      "conv2d_nchwc (3x3, stride 1, groups 1, 16-channel blocks) computed by Winograd's F(", kTile,
      "x", kTile, ", 3x3)");
  def.parse_attrs = ParseConv2DAttrs;
  def.infer_type = Conv2DNchwcWinogradRelation;
  def.compute = Conv2DNchwcCompute;
  def.flops = Conv2DNchwcWinogradFlops<kTile>;
  r.Register(std::move(def));
}

void RegisterConv2DNchwc(OpRegistry& r) {
  OpDef def;
  def.name = "conv2d_nchwc";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary =
      "2-D convolution, NCHW{c}c data, O/oc,C/c,KH,KW,c,oc weight, "
      "bias (O/oc, oc); groups 1, or one per channel block";
  def.parse_attrs = ParseConv2DAttrs;
  def.infer_type = Conv2DNchwcRelation;
  def.compute = Conv2DNchwcCompute;
  def.flops = Conv2DNchwcFlops;
  r.Register(std::move(def));
}

// conv2d_nchwc_depthwise: data (N, C/c, H, W, c), weight (C/c, KH, KW, c),
// optional bias (C/c, c) -> (N, C/c, OH, OW, c). Groups = C = O: output
// channel k reads input channel k alone, so its lane of a block reads the
// same lane of the input's block, and the weight is one vector per tap.
absl::StatusOr<TensorType> DepthwiseNchwcRelation(const std::vector<TensorType>& in,
                                                  const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 5 || w.rank() != 4 || w.shape[0] != x.shape[1] || w.shape[3] != x.shape[4]) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d_nchwc_depthwise wants data (N, C/c, H, W, c) and weight "
                     "(C/c, KH, KW, c), got ",
                     x.ToString(), " and ", w.ToString()));
  }
  if (in.size() == 3 && in[2].shape != std::vector<int64_t>{w.shape[0], w.shape[3]}) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d_nchwc_depthwise bias ",
                                                   in[2].ToString(), " must have shape [",
                                                   w.shape[0], ", ", w.shape[3], "]"));
  }
  std::vector<int64_t> out{x.shape[0], x.shape[1], 0, 0, x.shape[4]};
  for (int d = 0; d < 2; ++d) {
    KILN_ASSIGN_OR_RETURN(out[2 + d], ConvOutputExtent("conv2d_nchwc_depthwise", x.shape[2 + d],
                                                       a.padding[d], a.padding[d + 2],
                                                       w.shape[1 + d], a.dilation[d],
                                                       a.strides[d]));
  }
  return TensorType{DType::kFloat32, out};
}

// sum over the window of input[n][cb][y][x][lane] * weight[cb][ky][kx][lane].
Expr DepthwiseNchwcCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const std::vector<int64_t>& ws = ctx.input_type(1).shape;
  te::Var ky = ctx.ReduceVar("ry", ws[1]);
  te::Var kx = ctx.ReduceVar("rx", ws[2]);
  const std::vector<Expr>& o = ctx.out();
  Expr data = WindowRead(ctx, b.Ref(ky), b.Ref(kx), o[1], o[4]);
  Expr weight = ctx.Input(1, {o[1], b.Ref(ky), b.Ref(kx), o[4]});
  Expr sum = b.Reduce(te::ReduceOp::kSum, {ky, kx}, b.Mul(data, weight));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {o[1], o[4]}));
  return sum;
}

double DepthwiseNchwcFlops(const std::vector<TensorType>& in, const TensorType& out,
                           const Attrs&) {
  const std::vector<int64_t>& w = in[1].shape;
  const double outputs = static_cast<double>(out.NumElements());
  return 2 * outputs * static_cast<double>(w[1] * w[2]) + (in.size() == 3 ? outputs : 0);
}

void RegisterDepthwiseNchwc(OpRegistry& r) {
  OpDef def;
  def.name = "conv2d_nchwc_depthwise";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary =
      "depthwise 2-D convolution (groups = C = O), NCHW{c}c data, C/c,KH,KW,c weight, "
      "bias (C/c, c)";
  def.parse_attrs = ParseConv2DAttrs;
  def.infer_type = DepthwiseNchwcRelation;
  def.compute = DepthwiseNchwcCompute;
  def.flops = DepthwiseNchwcFlops;
  r.Register(std::move(def));
}

// conv2d_nchwc_grouped: data (N, C/c, H, W, c), weight (C/c, KH, KW, w, c),
// optional bias (C/c, c) -> (N, C/c, OH, OW, c). Groups of w channels in and
// out (C = O), w dividing c: output lane k of a block reads input lanes
// k / w * w + j (j < w) of the same block, times weight[block][ky][kx][j][k].
absl::StatusOr<TensorType> GroupedNchwcRelation(const std::vector<TensorType>& in,
                                                const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 5 || w.rank() != 5 || w.shape[0] != x.shape[1] || w.shape[4] != x.shape[4] ||
      w.shape[3] < 1 || x.shape[4] % w.shape[3] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d_nchwc_grouped wants data (N, C/c, H, W, c) and weight "
                     "(C/c, KH, KW, w, c), w dividing c, got ",
                     x.ToString(), " and ", w.ToString()));
  }
  if (in.size() == 3 && in[2].shape != std::vector<int64_t>{w.shape[0], w.shape[4]}) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d_nchwc_grouped bias ", in[2].ToString(),
                                                   " must have shape [", w.shape[0], ", ",
                                                   w.shape[4], "]"));
  }
  std::vector<int64_t> out{x.shape[0], x.shape[1], 0, 0, x.shape[4]};
  for (int d = 0; d < 2; ++d) {
    KILN_ASSIGN_OR_RETURN(
        out[2 + d],
        ConvOutputExtent("conv2d_nchwc_grouped", x.shape[2 + d], a.padding[d], a.padding[d + 2],
                         w.shape[1 + d], a.dilation[d], a.strides[d]));
  }
  return TensorType{DType::kFloat32, out};
}

Expr GroupedNchwcCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const std::vector<int64_t>& ws = ctx.input_type(1).shape;
  te::Var ky = ctx.ReduceVar("ry", ws[1]);
  te::Var kx = ctx.ReduceVar("rx", ws[2]);
  te::Var j = ctx.ReduceVar("rj", ws[3]);
  const std::vector<Expr>& o = ctx.out();
  Expr lane = b.Add(b.Mul(b.Div(o[4], b.Int(ws[3])), b.Int(ws[3])), b.Ref(j));
  Expr data = WindowRead(ctx, b.Ref(ky), b.Ref(kx), o[1], lane);
  Expr weight = ctx.Input(1, {o[1], b.Ref(ky), b.Ref(kx), b.Ref(j), o[4]});
  Expr sum = b.Reduce(te::ReduceOp::kSum, {ky, kx, j}, b.Mul(data, weight));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {o[1], o[4]}));
  return sum;
}

double GroupedNchwcFlops(const std::vector<TensorType>& in, const TensorType& out, const Attrs&) {
  const std::vector<int64_t>& w = in[1].shape;
  const double outputs = static_cast<double>(out.NumElements());
  return 2 * outputs * static_cast<double>(w[1] * w[2] * w[3]) + (in.size() == 3 ? outputs : 0);
}

void RegisterGroupedNchwc(OpRegistry& r) {
  OpDef def;
  def.name = "conv2d_nchwc_grouped";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary =
      "grouped 2-D convolution, groups of w channels in and out within a block, NCHW{c}c data, "
      "C/c,KH,KW,w,c weight, bias (C/c, c)";
  def.parse_attrs = ParseConv2DAttrs;
  def.infer_type = GroupedNchwcRelation;
  def.compute = GroupedNchwcCompute;
  def.flops = GroupedNchwcFlops;
  r.Register(std::move(def));
}

}  // namespace

void RegisterLayoutOps(OpRegistry& r) {
  RegisterLayoutTransform(r);
  RegisterConv2DNchwc(r);
  RegisterConv2DNchwcWinograd<2>(r);
  RegisterConv2DNchwcWinograd<3>(r);
  RegisterConv2DNchwcWinograd<4>(r);
  RegisterDepthwiseNchwc(r);
  RegisterGroupedNchwc(r);
}

}  // namespace kiln
