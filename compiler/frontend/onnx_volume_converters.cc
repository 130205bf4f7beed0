// 3-D Conv, MaxPool and AveragePool (NCDHW), as sums and maxima of 2-D ones
// over the depth taps.
//
// Design: a 3-D window is a 2-D window at each of its KD depth taps. For tap
// kd the input's depth slices kd * dilation, + stride, ... (after padding
// the depth) line up with the output's depths, so folding the output depth
// into the batch (convolution) or into the channels (pooling) makes every
// tap one ordinary 2-D op on the fast kernels, and the taps combine
// elementwise: convolution sums them, max pooling takes their maximum,
// average pooling weights each by the share of depth taps that count.
// No new kernels, and fusion sees plain ops.
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {

// A 3-D window's per-dim attributes, auto_pad applied.
struct Window3D {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: 3 begins, 3 ends
};

absl::StatusOr<Window3D> ReadWindow(const onnx::NodeProto& n, const std::vector<int64_t>& in,
                                    std::vector<int64_t> kernel) {
  Window3D w;
  w.kernel = std::move(kernel);
  w.strides = IntsAttr(n, "strides", {1, 1, 1});
  w.dilations = IntsAttr(n, "dilations", {1, 1, 1});
  w.pads = IntsAttr(n, "pads", {0, 0, 0, 0, 0, 0});
  if (w.kernel.size() != 3 || w.strides.size() != 3 || w.dilations.size() != 3 ||
      w.pads.size() != 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (", n.op_type(),
                     "): a 3-D window takes 3 kernel dims, 3 strides, 3 dilations and 6 pads"));
  }
  for (int d = 0; d < 3; ++d) {
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1 || w.pads[d] < 0 ||
        w.pads[d + 3] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): window attributes out of range"));
    }
  }
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int d = 0; d < 3; ++d) {
      std::tie(w.pads[d], w.pads[d + 3]) = SamePadding(in[2 + d], w.kernel[d], w.strides[d],
                                                       w.dilations[d], auto_pad == "SAME_UPPER");
    }
  } else if (auto_pad == "VALID") {
    w.pads = {0, 0, 0, 0, 0, 0};
  }
  return w;
}

// The input padded along depth (by `fill`), and the output depth.
absl::StatusOr<std::pair<Node*, int64_t>> PadDepth(Converter& c, const onnx::NodeProto& n, Node* x,
                                                   const Window3D& w, float fill) {
  const std::vector<int64_t>& xs = x->type.shape;
  const int64_t padded = xs[2] + w.pads[0] + w.pads[3];
  const int64_t span = w.dilations[0] * (w.kernel[0] - 1) + 1;
  if (padded < span) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): the depth window exceeds the input"));
  }
  const int64_t out_depth = (padded - span) / w.strides[0] + 1;
  if (w.pads[0] == 0 && w.pads[3] == 0) return std::make_pair(x, out_depth);
  PadAttrs pad;
  pad.pads = {0, 0, w.pads[0], 0, 0, 0, 0, w.pads[3], 0, 0};
  pad.value = fill;
  KILN_ASSIGN_OR_RETURN(Node * p, c.Add(n, "pad", {x}, pad, "/depth_padded"));
  return std::make_pair(p, out_depth);
}

// Depth tap kd: the slices [N, C, OD, H, W] it reads.
absl::StatusOr<Node*> DepthTap(Converter& c, const onnx::NodeProto& n, Node* x, const Window3D& w,
                               int64_t kd, int64_t out_depth) {
  const std::vector<int64_t>& xs = x->type.shape;
  SliceAttrs s{{0, 0, kd * w.dilations[0], 0, 0},
               {1, 1, w.strides[0], 1, 1},
               {xs[0], xs[1], out_depth, xs[3], xs[4]}};
  return c.Add(n, "slice", {x}, s, absl::StrCat("/tap", kd));
}

}  // namespace

absl::Status ConvertVolumeConv(Converter& c, const onnx::NodeProto& n, Node* x, Node* w_node) {
  const std::vector<int64_t>& ws = w_node->type.shape;
  if (ws.size() != 5) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Conv): weight ",
                                                   w_node->type.ToString(), " is not 5-D"));
  }
  KILN_ASSIGN_OR_RETURN(
      Window3D w, ReadWindow(n, x->type.shape, IntsAttr(n, "kernel_shape", {ws[2], ws[3], ws[4]})));
  KILN_ASSIGN_OR_RETURN(auto padded, PadDepth(c, n, x, w, 0.0f));
  auto [xp, out_depth] = padded;
  const std::vector<int64_t>& xs = xp->type.shape;
  Conv2DAttrs a;
  a.strides = {w.strides[1], w.strides[2]};
  a.dilation = {w.dilations[1], w.dilations[2]};
  a.padding = {w.pads[1], w.pads[2], w.pads[4], w.pads[5]};
  a.groups = IntAttr(n, "group", 1);
  Node* bias = nullptr;
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(bias, c.Value(n, 2));
  }
  Node* sum = nullptr;
  for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
    const std::string tap = absl::StrCat("/tap", kd);
    KILN_ASSIGN_OR_RETURN(Node * slices, DepthTap(c, n, xp, w, kd, out_depth));
    // [N, C, OD, H, W] -> [N * OD, C, H, W]: the output depth joins the batch.
    KILN_ASSIGN_OR_RETURN(Node * t, c.Add(n, "transpose", {slices}, TransposeAttrs{{0, 2, 1, 3, 4}},
                                          tap + "_depth_major"));
    KILN_ASSIGN_OR_RETURN(
        Node * batch,
        c.Add(n, "reshape", {t}, ReshapeAttrs{{xs[0] * out_depth, xs[1], xs[3], xs[4]}},
              tap + "_batch"));
    KILN_ASSIGN_OR_RETURN(
        Node * wk,
        c.Add(n, "slice", {w_node},
              SliceAttrs{{0, 0, kd, 0, 0}, {1, 1, 1, 1, 1}, {ws[0], ws[1], 1, ws[3], ws[4]}},
              tap + "_weight"));
    KILN_ASSIGN_OR_RETURN(wk, c.Add(n, "reshape", {wk}, ReshapeAttrs{{ws[0], ws[1], ws[3], ws[4]}},
                                    tap + "_weight_2d"));
    std::vector<Node*> in{batch, wk};
    if (kd == 0 && bias != nullptr) in.push_back(bias);
    KILN_ASSIGN_OR_RETURN(Node * y, c.Add(n, "conv2d", in, a, tap + "_conv"));
    if (sum == nullptr) {
      sum = y;
    } else {
      KILN_ASSIGN_OR_RETURN(sum, c.Add(n, "add", {sum, y}, NoAttrs{}, tap + "_sum"));
    }
  }
  const std::vector<int64_t>& ys = sum->type.shape;  // [N * OD, M, OH, OW]
  KILN_ASSIGN_OR_RETURN(
      Node * y, c.Add(n, "reshape", {sum}, ReshapeAttrs{{xs[0], out_depth, ys[1], ys[2], ys[3]}},
                      "/split_depth"));
  KILN_ASSIGN_OR_RETURN(y, c.Add(n, "transpose", {y}, TransposeAttrs{{0, 2, 1, 3, 4}}));
  return c.Define(n.output(0), y);
}

// 3-D ConvTranspose: output depth position f (before cropping by the
// depth pads) gathers from input depth id through depth tap kd where
// f = id * stride + kd * dilation. Each tap is one 2-D conv2d_transpose over
// all input depths at once (depth joined to the batch), its result placed
// at its output depths by a gather along depth with a table worked out
// here (positions no input reaches read an appended zero slice); the taps
// sum. Cropping by the depth pads and output padding are in the table too.
absl::Status ConvertVolumeConvTranspose(Converter& c, const onnx::NodeProto& n, Node* x, Node* w,
                                        const std::vector<int64_t>& strides,
                                        const std::vector<int64_t>& dilations,
                                        const std::vector<int64_t>& output_padding,
                                        const std::vector<int64_t>& pads) {
  const std::vector<int64_t>& xs = x->type.shape;  // [N, C, ID, H, W]
  const std::vector<int64_t>& ws = w->type.shape;  // [C, M / group, KD, KH, KW]
  const int64_t depth = xs[2], taps = ws[2];
  const int64_t full = strides[0] * (depth - 1) + (taps - 1) * dilations[0] + 1 + output_padding[0];
  const int64_t out_depth = full - pads[0] - pads[3];
  if (out_depth < 1 || out_depth > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (ConvTranspose): output depth ", out_depth));
  }
  KILN_ASSIGN_OR_RETURN(
      Attrs attrs, ConvTranspose2DAttrs(n, {strides[1], strides[2]}, {dilations[1], dilations[2]},
                                        {output_padding[1], output_padding[2]},
                                        {pads[1], pads[2], pads[4], pads[5]}));
  // [N, C, ID, H, W] -> [N * ID, C, H, W]: the input depth joins the batch.
  KILN_ASSIGN_OR_RETURN(
      Node * t, c.Add(n, "transpose", {x}, TransposeAttrs{{0, 2, 1, 3, 4}}, "/depth_major"));
  KILN_ASSIGN_OR_RETURN(
      Node * batch,
      c.Add(n, "reshape", {t}, ReshapeAttrs{{xs[0] * depth, xs[1], xs[3], xs[4]}}, "/batch"));
  Node* sum = nullptr;
  for (int64_t kd = 0; kd < taps; ++kd) {
    const std::string tap = absl::StrCat("/tap", kd);
    KILN_ASSIGN_OR_RETURN(
        Node * wk,
        c.Add(n, "slice", {w},
              SliceAttrs{{0, 0, kd, 0, 0}, {1, 1, 1, 1, 1}, {ws[0], ws[1], 1, ws[3], ws[4]}},
              tap + "_weight"));
    KILN_ASSIGN_OR_RETURN(wk, c.Add(n, "reshape", {wk}, ReshapeAttrs{{ws[0], ws[1], ws[3], ws[4]}},
                                    tap + "_weight_2d"));
    KILN_ASSIGN_OR_RETURN(Node * z,
                          c.Add(n, "conv2d_transpose", {batch, wk}, attrs, tap + "_conv"));
    const std::vector<int64_t>& zs = z->type.shape;  // [N * ID, M, OH, OW]
    KILN_ASSIGN_OR_RETURN(
        z, c.Add(n, "reshape", {z}, ReshapeAttrs{{xs[0], depth, zs[1], zs[2], zs[3]}},
                 tap + "_depths"));
    PadAttrs zero_slice;
    zero_slice.pads = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    KILN_ASSIGN_OR_RETURN(z, c.Add(n, "pad", {z}, zero_slice, tap + "_with_zero"));
    std::vector<int64_t> from(out_depth);
    for (int64_t o = 0; o < out_depth; ++o) {
      const int64_t f = o + pads[0] - kd * dilations[0];
      const bool hit = f >= 0 && f % strides[0] == 0 && f / strides[0] < depth;
      from[o] = hit ? f / strides[0] : depth;
    }
    Node* table =
        c.Constant(n.name() + tap + "_from", TensorType{DType::kInt64, {out_depth}}, from.data());
    KILN_ASSIGN_OR_RETURN(Node * placed,
                          c.Add(n, "gather", {z, table}, AxisAttrs{1}, tap + "_placed"));
    if (sum == nullptr) {
      sum = placed;
    } else {
      KILN_ASSIGN_OR_RETURN(sum, c.Add(n, "add", {sum, placed}, NoAttrs{}, tap + "_sum"));
    }
  }
  const std::vector<int64_t>& ys = sum->type.shape;  // [N, OD, M, OH, OW]
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(Node * bias, c.Value(n, 2));
    if (bias->type.shape != std::vector<int64_t>{ys[2]}) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (ConvTranspose): bias ",
                                                     bias->type.ToString(), " for ", ys[2],
                                                     " output channels"));
    }
    KILN_ASSIGN_OR_RETURN(
        bias, c.Add(n, "reshape", {bias}, ReshapeAttrs{{1, 1, ys[2], 1, 1}}, "/bias_5d"));
    KILN_ASSIGN_OR_RETURN(sum, c.Add(n, "add", {sum, bias}, NoAttrs{}, "/bias"));
  }
  KILN_ASSIGN_OR_RETURN(Node * y, c.Add(n, "transpose", {sum}, TransposeAttrs{{0, 2, 1, 3, 4}}));
  return c.Define(n.output(0), y);
}

absl::Status ConvertVolumePool(Converter& c, const onnx::NodeProto& n, Node* x, bool average) {
  if (!IsFloatDType(x->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                 "): 3-D pooling of ", DTypeName(x->type.dtype)));
  }
  if (IntAttr(n, "ceil_mode", 0) != 0) {
    return absl::UnimplementedError(
        absl::StrCat("node '", n.name(), "' (", n.op_type(), "): ceil_mode in 3-D pooling"));
  }
  KILN_ASSIGN_OR_RETURN(Window3D w, ReadWindow(n, x->type.shape, IntsAttr(n, "kernel_shape", {})));
  const bool count_pad = IntAttr(n, "count_include_pad", 0) != 0;
  const float fill = average ? 0.0f : -std::numeric_limits<float>::infinity();
  KILN_ASSIGN_OR_RETURN(auto padded, PadDepth(c, n, x, w, fill));
  auto [xp, out_depth] = padded;
  const std::vector<int64_t>& xs = xp->type.shape;
  Pool2DAttrs a;
  a.kernel = {w.kernel[1], w.kernel[2]};
  a.strides = {w.strides[1], w.strides[2]};
  a.dilation = {w.dilations[1], w.dilations[2]};
  a.padding = {w.pads[1], w.pads[2], w.pads[4], w.pads[5]};
  a.count_include_pad = count_pad;
  Node* combined = nullptr;
  for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
    const std::string tap = absl::StrCat("/tap", kd);
    KILN_ASSIGN_OR_RETURN(Node * slices, DepthTap(c, n, xp, w, kd, out_depth));
    // [N, C, OD, H, W] -> [N, C * OD, H, W]: pooling is per plane.
    KILN_ASSIGN_OR_RETURN(
        Node * planes,
        c.Add(n, "reshape", {slices}, ReshapeAttrs{{xs[0], xs[1] * out_depth, xs[3], xs[4]}},
              tap + "_planes"));
    KILN_ASSIGN_OR_RETURN(
        Node * p, c.Add(n, average ? "avg_pool2d" : "max_pool2d", {planes}, a, tap + "_pool"));
    const std::vector<int64_t>& ps = p->type.shape;
    KILN_ASSIGN_OR_RETURN(
        p, c.Add(n, "reshape", {p}, ReshapeAttrs{{xs[0], xs[1], out_depth, ps[2], ps[3]}},
                 tap + "_volume"));
    if (average) {
      // Each output depth's share for this tap: 1 / (taps that count), 0
      // for a tap in the depth padding unless padding counts.
      std::vector<double> share(out_depth);
      for (int64_t od = 0; od < out_depth; ++od) {
        int64_t counted = 0;
        bool inside = false;
        for (int64_t k = 0; k < w.kernel[0]; ++k) {
          const int64_t at = od * w.strides[0] + k * w.dilations[0] - w.pads[0];
          const bool in_range = at >= 0 && at < x->type.shape[2];
          counted += count_pad || in_range;
          if (k == kd) inside = count_pad || in_range;
        }
        share[od] = inside ? 1.0 / static_cast<double>(counted) : 0.0;
      }
      const TensorType type{x->type.dtype, {out_depth, 1, 1}};
      std::string bytes(type.ByteSize(), '\0');
      for (int64_t od = 0; od < out_depth; ++od) {
        WriteElementFromDouble(type.dtype, bytes.data(), od, share[od]);
      }
      Node* weights = c.Constant(n.name() + tap + "_share", type, bytes.data());
      KILN_ASSIGN_OR_RETURN(p, c.Add(n, "mul", {p, weights}, NoAttrs{}, tap + "_weighted"));
    }
    if (combined == nullptr) {
      combined = p;
    } else {
      KILN_ASSIGN_OR_RETURN(combined, c.Add(n, average ? "add" : "maximum", {combined, p},
                                            NoAttrs{}, tap + "_combined"));
    }
  }
  return c.Define(n.output(0), combined);
}


}  // namespace kiln::onnx_import
