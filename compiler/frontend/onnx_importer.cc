// The ONNX importer.
//
// 1. Parse the bytes (protobuf, with a size limit), refuse external data, run
//    onnx::checker and shape inference (their exceptions are caught here and
//    become InvalidArgument: nothing thrown leaves this file).
// 2. Initializers become constants; the remaining graph inputs become inputs,
//    symbolic dims fixed from the options.
// 3. Nodes are converted in order through a table of converters, one per ONNX
//    op type; each converter adds Kiln op nodes, typed at once so that later
//    converters can read shapes (Flatten, Gemm's bias, auto_pad).
#include "compiler/frontend/onnx_importer.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/crash_probe.h"
#include "common/status_macros.h"
#include "compiler/frontend/onnx_converter.h"
#include "compiler/frontend/onnx_external_data.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ir/verifier.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/fold_constant.h"
#include "google/protobuf/io/coded_stream.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace kiln {
namespace onnx_import {
namespace {

constexpr int64_t kMaxModelBytes = int64_t{2} << 30;

}  // namespace

// Unimplemented, naming op, node and opset, for a node Kiln has no
// converter for (any domain but ONNX's default is unsupported).
absl::Status CheckOperatorSupported(const onnx::NodeProto& n, int64_t opset) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "': operator domain '",
                                                 n.domain(), "' is not supported"));
  }
  if (!ConverterTable().count(n.op_type())) {
    return absl::UnimplementedError(absl::StrCat("unsupported ONNX operator ", n.op_type(),
                                                 " (node '", n.name(), "', opset ", opset, ")"));
  }
  return absl::OkStatus();
}

namespace {


// One-to-one ops: every input passed on, no attributes.
ConvertFn Simple(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    std::vector<Node*> inputs;
    for (int i = 0; i < n.input_size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
      inputs.push_back(v);
    }
    KILN_ASSIGN_OR_RETURN(Node* out, c.Add(n, kiln_op, inputs));
    return c.Define(n.output(0), out);
  };
}

absl::Status ConvertIdentity(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  return c.Define(n.output(0), x);  // Dropout in inference, Identity
}

// Dropout is the identity in inference; opset 12's training_mode input,
// when given, must be a constant false (training mode drops at random).
// Dropout at inference is the identity; so is training mode with a drop
// ratio of constant 0 (torchvision's Swin exports attention dropout so).
absl::Status ConvertDropout(Converter& c, const onnx::NodeProto& n) {
  bool zero_ratio = false;
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(Node* ratio, c.Value(n, 1));
    zero_ratio = ratio->is_constant() && ratio->type.NumElements() == 1 &&
                 ReadElementAsDouble(ratio->type.dtype, ratio->value->bytes.data(), 0) == 0;
  }
  if (c.HasInput(n, 2) && !zero_ratio) {
    KILN_ASSIGN_OR_RETURN(Node* training, c.Value(n, 2));
    if (!training->is_constant() || training->type.dtype != DType::kBool ||
        training->type.NumElements() != 1 || training->value->bytes[0] != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", n.name(), "' (Dropout, opset ", c.opset(),
          "): training mode (random dropping) is not supported; inference only"));
    }
  }
  if (n.output_size() > 1 && !n.output(1).empty()) {
    // The mask: every element kept, in inference.
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    const bool kept = true;
    Node* one = c.Constant(n.name() + "/kept", TensorType{DType::kBool, {}}, &kept);
    KILN_ASSIGN_OR_RETURN(Node* mask, c.Add(n, "expand", {one}, ReshapeAttrs{x->type.shape},
                                            "/mask"));
    KILN_RETURN_IF_ERROR(c.Define(n.output(1), mask));
  }
  return ConvertIdentity(c, n);
}

absl::Status ConvertGemm(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* a, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 1));
  // Everything below reads A's and B's two dims (fuzz/onnx_converter_fuzzer
  // found a 1-D B read past its shape); ONNX's Gemm takes only matrices.
  if (a->type.rank() != 2 || b->type.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (Gemm): A and B must be 2-D; got ", a->type.ToString(),
                     " and ", b->type.ToString()));
  }
  const float alpha = FloatAttr(n, "alpha", 1), beta = FloatAttr(n, "beta", 1);
  if (IntAttr(n, "transA", 0)) {
    KILN_ASSIGN_OR_RETURN(a, c.Add(n, "transpose", {a}, TransposeAttrs{{1, 0}}, "/transA"));
  }
  const bool trans_b = IntAttr(n, "transB", 0) != 0;
  const char* op = trans_b ? "dense" : "matmul";
  if (alpha == 1 && beta == 1 && !IntAttr(n, "transA", 0)) {
    Node* bias = nullptr;
    if (c.HasInput(n, 2)) {
      KILN_ASSIGN_OR_RETURN(bias, c.Value(n, 2));
    }
    KILN_ASSIGN_OR_RETURN(Node* y, QuantizedLinear(c, n, trans_b, bias));
    if (y != nullptr) return c.Define(n.output(0), y);
  }
  if (c.HasInput(n, 2) && alpha == 1 && beta == 1) {
    KILN_ASSIGN_OR_RETURN(Node* bias, c.Value(n, 2));
    const int64_t cols = trans_b ? b->type.shape[0] : b->type.shape[1];
    if (bias->type.shape == std::vector<int64_t>{cols}) {
      // The common case: a per-column bias the linear op takes itself.
      KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, op, {a, b, bias}));
      return c.Define(n.output(0), y);
    }
  }
  KILN_ASSIGN_OR_RETURN(Node* y,
                        c.Add(n, op, {a, b}, NoAttrs{}, c.HasInput(n, 2) ? "/matmul" : ""));
  if (alpha != 1) {
    KILN_ASSIGN_OR_RETURN(
        y, c.Add(n, "mul", {y, c.ScalarOf(n.name() + "/alpha", y->type.dtype, alpha)}, NoAttrs{},
                 "/alpha_mul"));
  }
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(Node* bias, c.Value(n, 2));
    if (beta != 1) {
      KILN_ASSIGN_OR_RETURN(
          bias, c.Add(n, "mul", {bias, c.ScalarOf(n.name() + "/beta", bias->type.dtype, beta)},
                      NoAttrs{}, "/beta_mul"));
    }
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "add", {y, bias}));
  }
  return c.Define(n.output(0), y);
}

absl::Status ConvertMatMul(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* a, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 1));
  if (b->type.rank() < 2 || a->type.rank() < 2) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(),
                                                 "' (MatMul): 1-D operands are not supported"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, QuantizedLinear(c, n, /*trans_b=*/false, nullptr));
  if (y == nullptr) {
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "matmul", {a, b}));
  }
  return c.Define(n.output(0), y);
}

// Reshape and Expand: data plus a constant target shape.
ConvertFn WithShapeOperand(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ConstantInts(n, 1));
    if (n.op_type() == "Reshape" && IntAttr(n, "allowzero", 0) != 0 &&
        std::count(shape.begin(), shape.end(), 0) > 0) {
      // A literal 0 (Kiln's reshape copies the input's dim for a 0): the
      // result is empty, an empty constant of that shape.
      if (x->type.NumElements() != 0 || std::count(shape.begin(), shape.end(), -1) > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", n.name(), "' (Reshape, allowzero): cannot reshape ", x->type.ToString(),
            " to ", ShapeToString(shape)));
      }
      return c.Define(n.output(0), c.Constant(n.name(), TensorType{x->type.dtype, shape}, ""));
    }
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, kiln_op, {x}, ReshapeAttrs{shape}));
    return c.Define(n.output(0), y);
  };
}

absl::Status ConvertFlatten(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        AxisAttr(n, "axis", 1, x->type.rank(), /*one_past_last=*/true));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->type.shape[d];
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {x}, ReshapeAttrs{{outer, -1}}));
  return c.Define(n.output(0), y);
}

absl::Status ConvertTranspose(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node * y,
                        c.Add(n, "transpose", {x}, TransposeAttrs{IntsAttr(n, "perm", {})}));
  return c.Define(n.output(0), y);
}

// A 1-D convolution runs as a 2-D one over a plane of height 1: its input
// [N, C, L] and weights [O, C/g, K] reshaped to [N, C, 1, L] and
// [O, C/g, 1, K], its attributes given a height of 1, the output reshaped
// back. Audio and time-series nets are 1-D.
absl::Status ConvertConv1D(Converter& c, const onnx::NodeProto& n, Node* x, Node* w) {
  // Sizes first: an attribute given with no values is an empty list (`at(0)`
  // threw on one, and nothing catches an exception from a converter).
  const std::vector<int64_t> strides = IntsAttr(n, "strides", {1});
  const std::vector<int64_t> dilations = IntsAttr(n, "dilations", {1});
  std::vector<int64_t> pads = IntsAttr(n, "pads", {0, 0});
  if (strides.size() != 1 || dilations.size() != 1 || pads.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", n.name(), "' (Conv): a 1-D convolution takes one stride, one dilation and "
        "two pads"));
  }
  const int64_t stride = strides[0];
  const int64_t dilation = dilations[0];
  const onnx::AttributeProto* auto_pad = FindAttr(n, "auto_pad");
  if (auto_pad && (auto_pad->s() == "SAME_UPPER" || auto_pad->s() == "SAME_LOWER")) {
    std::tie(pads[0], pads[1]) = SamePadding(x->type.shape[2], w->type.shape[2], stride,
                                             dilation, auto_pad->s() == "SAME_UPPER");
  } else if (auto_pad && auto_pad->s() == "VALID") {
    pads = {0, 0};
  }
  Conv2DAttrs a;
  a.strides = {1, stride};
  a.dilation = {1, dilation};
  a.groups = IntAttr(n, "group", 1);
  a.padding = {0, pads[0], 0, pads[1]};
  KILN_RETURN_IF_ERROR(CheckWindowAttrs(n, a.strides, a.dilation, a.padding));
  const std::vector<int64_t>& xs = x->type.shape;
  const std::vector<int64_t>& ws = w->type.shape;
  KILN_ASSIGN_OR_RETURN(Node* x2, c.Add(n, "reshape", {x},
                                        ReshapeAttrs{{xs[0], xs[1], 1, xs[2]}}, "/x_2d"));
  KILN_ASSIGN_OR_RETURN(Node* w2, c.Add(n, "reshape", {w},
                                        ReshapeAttrs{{ws[0], ws[1], 1, ws[2]}}, "/w_2d"));
  std::vector<Node*> inputs{x2, w2};
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 2));
    inputs.push_back(b);
  }
  KILN_ASSIGN_OR_RETURN(Node* y2, c.Add(n, "conv2d", inputs, a, "/2d"));
  const std::vector<int64_t>& ys = y2->type.shape;
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {y2}, ReshapeAttrs{{ys[0], ys[1], ys[3]}}));
  return c.Define(n.output(0), y);
}

}  // namespace

absl::StatusOr<Attrs> ConvTranspose2DAttrs(const onnx::NodeProto& n,
                                           const std::vector<int64_t>& strides,
                                           const std::vector<int64_t>& dilations,
                                           std::vector<int64_t> output_padding,
                                           std::vector<int64_t> padding) {
  RawAttrs raw;
  raw["strides"] = strides;
  raw["dilation"] = dilations;
  raw["groups"] = IntAttr(n, "group", 1);
  // Negative end pads (from output_shape) are output padding.
  for (int d = 0; d < 2; ++d) {
    if (padding[d + 2] < 0) {
      output_padding[d] -= padding[d + 2];
      padding[d + 2] = 0;
    }
  }
  raw["padding"] = padding;
  raw["output_padding"] = output_padding;
  const OpDef* def = OpRegistry::Default().Find("conv2d_transpose");
  absl::StatusOr<Attrs> attrs = def->parse_attrs(raw);
  if (!attrs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (ConvTranspose): ", attrs.status().message()));
  }
  return attrs;
}

namespace {

// ConvTranspose in 1-D (as 2-D of height 1), 2-D, and 3-D (depth taps of
// 2-D ones, onnx_volume_converters.cc). Padding from pads, or from
// output_shape / auto_pad SAME as ONNX defines them; output_padding becomes
// a negative end padding (conv2d_transpose's convention).
absl::Status ConvertConvTranspose(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* w, c.Value(n, 1));
  const int rank = static_cast<int>(x->type.rank());
  if ((rank != 3 && rank != 4 && rank != 5) || w->type.rank() != rank) {
    return absl::UnimplementedError(
        absl::StrCat("node '", n.name(), "' (ConvTranspose): only 1-D, 2-D and 3-D are supported"));
  }
  const int dims = rank - 2;
  const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
  std::vector<int64_t> strides = IntsAttr(n, "strides", ones);
  std::vector<int64_t> dilations = IntsAttr(n, "dilations", ones);
  std::vector<int64_t> extra = IntsAttr(n, "output_padding", zeros);
  std::vector<int64_t> pads = IntsAttr(n, "pads", std::vector<int64_t>(2 * dims, 0));
  const std::vector<int64_t> output_shape = IntsAttr(n, "output_shape", {});
  if (static_cast<int>(strides.size()) != dims || static_cast<int>(dilations.size()) != dims ||
      static_cast<int>(extra.size()) != dims || static_cast<int>(pads.size()) != 2 * dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", n.name(), "' (ConvTranspose): strides, dilations, output_padding and pads "
        "must have one (pads: two) entries per spatial dim"));
  }
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!output_shape.empty() || same) {
    std::vector<int64_t> target(dims);
    for (int d = 0; d < dims; ++d) {
      const size_t from_end = output_shape.size() >= static_cast<size_t>(dims)
                                  ? output_shape.size() - dims + d
                                  : 0;
      target[d] = !output_shape.empty() ? output_shape[from_end]
                                        : x->type.shape[2 + d] * strides[d];
      const int64_t total = strides[d] * (x->type.shape[2 + d] - 1) + extra[d] +
                            (w->type.shape[2 + d] - 1) * dilations[d] + 1 - target[d];
      // Floor division, as ONNX's reference: a negative total (output_shape
      // past the natural size) becomes output padding at the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        pads[d] = half;
        pads[d + dims] = total - half;
      } else {
        pads[d] = total - half;
        pads[d + dims] = half;
      }
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  if (dims == 3) {
    for (int64_t v : strides) {
      if (v < 1) return absl::InvalidArgumentError("ConvTranspose: strides must be positive");
    }
    for (int64_t v : dilations) {
      if (v < 1) return absl::InvalidArgumentError("ConvTranspose: dilations must be positive");
    }
    return ConvertVolumeConvTranspose(c, n, x, w, strides, dilations, extra, pads);
  }
  // 1-D: a height of 1 in front of every spatial list.
  auto two_d = [&](std::vector<int64_t> v, int64_t unit) {
    if (dims == 2) return v;
    return std::vector<int64_t>{unit, v[0]};
  };
  KILN_ASSIGN_OR_RETURN(
      Attrs attrs,
      ConvTranspose2DAttrs(n, two_d(strides, 1), two_d(dilations, 1), two_d(extra, 0),
                           dims == 2 ? std::vector<int64_t>{pads[0], pads[1], pads[2], pads[3]}
                                     : std::vector<int64_t>{0, pads[0], 0, pads[1]}));
  Node* x2 = x;
  Node* w2 = w;
  if (dims == 1) {
    const std::vector<int64_t>& xs = x->type.shape;
    const std::vector<int64_t>& ws = w->type.shape;
    KILN_ASSIGN_OR_RETURN(x2, c.Add(n, "reshape", {x}, ReshapeAttrs{{xs[0], xs[1], 1, xs[2]}},
                                    "/x_2d"));
    KILN_ASSIGN_OR_RETURN(w2, c.Add(n, "reshape", {w}, ReshapeAttrs{{ws[0], ws[1], 1, ws[2]}},
                                    "/w_2d"));
  }
  std::vector<Node*> inputs{x2, w2};
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 2));
    inputs.push_back(b);
  }
  KILN_ASSIGN_OR_RETURN(Node * y,
                        c.Add(n, "conv2d_transpose", inputs, attrs, dims == 1 ? "/2d" : ""));
  if (dims == 1) {
    const std::vector<int64_t>& ys = y->type.shape;
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "reshape", {y}, ReshapeAttrs{{ys[0], ys[1], ys[3]}}));
  }
  return c.Define(n.output(0), y);
}

}  // namespace

// A 2-D Conv node's convolution of x by w (+ bias), its attributes read from n.
absl::StatusOr<Node*> Conv2D(Converter& c, const onnx::NodeProto& n, Node* x, Node* w,
                             Node* bias) {
  if (x->type.rank() != 4) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                 "): only 1-D and 2-D convolution are supported"));
  }
  if (w->type.rank() != 4) {  // SAME padding below reads its window dims
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): weights ", w->type.ToString(),
                                                   " for a 2-D input need rank 4"));
  }
  Conv2DAttrs a;
  a.strides = IntsAttr(n, "strides", {1, 1});
  a.dilation = IntsAttr(n, "dilations", {1, 1});
  a.groups = IntAttr(n, "group", 1);
  a.padding = IntsAttr(n, "pads", {0, 0, 0, 0});
  KILN_RETURN_IF_ERROR(CheckWindowAttrs(n, a.strides, a.dilation, a.padding));
  const onnx::AttributeProto* auto_pad = FindAttr(n, "auto_pad");
  if (auto_pad && auto_pad->s() != "NOTSET" && auto_pad->s() != "VALID") {
    // SAME_UPPER / SAME_LOWER: output = ceil(input / stride); extra padding at
    // the end (UPPER) or the start (LOWER).
    const bool upper = auto_pad->s() == "SAME_UPPER";
    for (int d = 0; d < 2; ++d) {
      std::tie(a.padding[d], a.padding[d + 2]) = SamePadding(
          x->type.shape[2 + d], w->type.shape[2 + d], a.strides[d], a.dilation[d], upper);
    }
  } else if (auto_pad && auto_pad->s() == "VALID") {
    a.padding = {0, 0, 0, 0};
  }
  std::vector<Node*> inputs{x, w};
  if (bias != nullptr) inputs.push_back(bias);
  return c.Add(n, "conv2d", inputs, a);
}

namespace {

absl::Status ConvertConv(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* w, c.Value(n, 1));
  if (x->type.rank() == 3 && w->type.rank() == 3) return ConvertConv1D(c, n, x, w);
  if (x->type.rank() == 5) return ConvertVolumeConv(c, n, x, w);
  Node* bias = nullptr;
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(bias, c.Value(n, 2));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, QuantizedConv2D(c, n, bias));
  if (y == nullptr) {
    KILN_ASSIGN_OR_RETURN(y, Conv2D(c, n, x, w, bias));
  }
  return c.Define(n.output(0), y);
}

absl::Status ConvertBatchNorm(Converter& c, const onnx::NodeProto& n) {
  std::vector<Node*> inputs;
  for (int i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
    inputs.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "batch_norm", inputs,
                                       BatchNormAttrs{1, FloatAttr(n, "epsilon", 1e-5f)}));
  return c.Define(n.output(0), y);
}

// ONNX's other reductions, composed: `before` maps each element (none:
// as is), `kiln_op` reduces, `after` maps the result (none: as is).
// ReduceLogSumExp subtracts the maximum first, so exp never overflows.
ConvertFn ComposedReduce(const std::string& kind) {
  return [kind](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    std::vector<int64_t> axes = IntsAttr(n, "axes", {});
    if (c.HasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(axes, c.ConstantInts(n, 1));
    }
    const bool keep = IntAttr(n, "keepdims", 1) != 0;
    if (axes.empty() && IntAttr(n, "noop_with_empty_axes", 0)) return c.Define(n.output(0), x);
    if (!IsFloatDType(x->type.dtype)) {
      return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): float tensors only"));
    }
    auto unary = [&](const char* op, Node* v, const char* suffix) {
      return c.Add(n, op, {v}, NoAttrs{}, suffix);
    };
    auto reduce = [&](const char* op, Node* v, bool keepdims, const char* suffix) {
      return c.Add(n, op, {v}, ReduceAttrs{axes, keepdims}, suffix);
    };
    Node* y = nullptr;
    if (kind == "l1") {
      KILN_ASSIGN_OR_RETURN(Node* a, unary("abs", x, "/abs"));
      KILN_ASSIGN_OR_RETURN(y, reduce("sum", a, keep, ""));
    } else if (kind == "l2" || kind == "sum_square") {
      KILN_ASSIGN_OR_RETURN(Node* sq, c.Add(n, "mul", {x, x}, NoAttrs{}, "/square"));
      KILN_ASSIGN_OR_RETURN(y, reduce("sum", sq, keep, kind == "l2" ? "/sum" : ""));
      if (kind == "l2") {
        KILN_ASSIGN_OR_RETURN(y, unary("sqrt", y, ""));
      }
    } else if (kind == "log_sum") {
      KILN_ASSIGN_OR_RETURN(Node* s, reduce("sum", x, keep, "/sum"));
      KILN_ASSIGN_OR_RETURN(y, unary("log", s, ""));
    } else if (kind == "log_sum_exp") {
      KILN_ASSIGN_OR_RETURN(Node* m, reduce("max", x, true, "/max"));
      KILN_ASSIGN_OR_RETURN(Node* shifted, c.Add(n, "sub", {x, m}, NoAttrs{}, "/shift"));
      KILN_ASSIGN_OR_RETURN(Node* e, unary("exp", shifted, "/exp"));
      KILN_ASSIGN_OR_RETURN(Node* s, reduce("sum", e, keep, "/sum"));
      KILN_ASSIGN_OR_RETURN(Node* l, unary("log", s, "/log"));
      KILN_ASSIGN_OR_RETURN(Node* mk, reduce("max", x, keep, "/max_kept"));
      KILN_ASSIGN_OR_RETURN(y, c.Add(n, "add", {l, mk}, NoAttrs{}, ""));
    } else {
      KILN_ASSIGN_OR_RETURN(y, reduce("prod", x, keep, ""));
    }
    return c.Define(n.output(0), y);
  };
}

// x where x >= 0, else slope * x (slope broadcast: ONNX's unidirectional
// broadcasting is NumPy's here, as the slope never has more dims).
absl::Status ConvertPRelu(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* slope, c.Value(n, 1));
  Node* zero = c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
  KILN_ASSIGN_OR_RETURN(Node* negative, c.Add(n, "minimum", {x, zero}, NoAttrs{}, "/negative"));
  KILN_ASSIGN_OR_RETURN(Node* scaled, c.Add(n, "mul", {negative, slope}, NoAttrs{}, "/scaled"));
  KILN_ASSIGN_OR_RETURN(Node* positive, c.Add(n, "relu", {x}, NoAttrs{}, "/positive"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "add", {positive, scaled}));
  return c.Define(n.output(0), y);
}

// The max over each (n, c) plane, kept as [N, C, 1, 1].
absl::Status ConvertGlobalMaxPool(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  std::vector<int64_t> axes;
  for (int d = 2; d < x->type.rank(); ++d) axes.push_back(d);
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "max", {x}, ReduceAttrs{axes, true}));
  return c.Define(n.output(0), y);
}

// (x - mean) / sqrt(var + epsilon) * scale + bias, statistics per (n, c)
// over the spatial dims.
absl::Status ConvertInstanceNorm(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* scale, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* bias, c.Value(n, 2));
  const int rank = static_cast<int>(x->type.rank());
  if (rank < 3 || !IsFloatDType(x->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(),
                                                 "' (InstanceNormalization): float, rank >= 3"));
  }
  std::vector<int64_t> axes, per_channel{x->type.shape[1]};
  for (int d = 2; d < rank; ++d) {
    axes.push_back(d);
    per_channel.push_back(1);
  }
  KILN_ASSIGN_OR_RETURN(Node* mean, c.Add(n, "mean", {x}, ReduceAttrs{axes, true}, "/mean"));
  KILN_ASSIGN_OR_RETURN(Node* centred, c.Add(n, "sub", {x, mean}, NoAttrs{}, "/centred"));
  KILN_ASSIGN_OR_RETURN(Node* sq, c.Add(n, "mul", {centred, centred}, NoAttrs{}, "/square"));
  KILN_ASSIGN_OR_RETURN(Node* var, c.Add(n, "mean", {sq}, ReduceAttrs{axes, true}, "/var"));
  KILN_ASSIGN_OR_RETURN(Node * padded,
                        c.Add(n, "add",
                              {var, c.ScalarOf(n.name() + "/epsilon", var->type.dtype,
                                               FloatAttr(n, "epsilon", 1e-5f))},
                              NoAttrs{}, "/var_eps"));
  KILN_ASSIGN_OR_RETURN(Node* sd, c.Add(n, "sqrt", {padded}, NoAttrs{}, "/sd"));
  KILN_ASSIGN_OR_RETURN(Node* normal, c.Add(n, "div", {centred, sd}, NoAttrs{}, "/normal"));
  KILN_ASSIGN_OR_RETURN(Node* s, c.Add(n, "reshape", {scale}, ReshapeAttrs{per_channel},
                                       "/scale"));
  KILN_ASSIGN_OR_RETURN(Node* b, c.Add(n, "reshape", {bias}, ReshapeAttrs{per_channel}, "/bias"));
  KILN_ASSIGN_OR_RETURN(Node* scaled, c.Add(n, "mul", {normal, s}, NoAttrs{}, "/scaled"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "add", {scaled, b}));
  return c.Define(n.output(0), y);
}

// DepthToSpace (DCR and CRD) and SpaceToDepth: a reshape, a transpose and a
// reshape, as ONNX defines them.
absl::Status ConvertDepthSpace(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (x->type.rank() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): wants a 4-D input"));
  }
  const int64_t b = IntAttr(n, "blocksize", 1);
  const std::vector<int64_t>& s = x->type.shape;
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  std::vector<int64_t> split, perm, joined;
  if (n.op_type() == "SpaceToDepth") {
    if (H % b != 0 || W % b != 0) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                     "' (SpaceToDepth): H and W must divide by ",
                                                     "blocksize"));
    }
    split = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    joined = {N, C * b * b, H / b, W / b};
  } else {
    if (C % (b * b) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node '", n.name(), "' (DepthToSpace): C must divide by blocksize^2"));
    }
    if (StringAttr(n, "mode", "DCR") == "CRD") {
      split = {N, C / (b * b), b, b, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      split = {N, b, b, C / (b * b), H, W};
      perm = {0, 3, 4, 1, 5, 2};
    }
    joined = {N, C / (b * b), H * b, W * b};
  }
  KILN_ASSIGN_OR_RETURN(Node* a, c.Add(n, "reshape", {x}, ReshapeAttrs{split}, "/split"));
  KILN_ASSIGN_OR_RETURN(Node* t, c.Add(n, "transpose", {a}, TransposeAttrs{perm}, "/move"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {t}, ReshapeAttrs{joined}));
  return c.Define(n.output(0), y);
}

// Tile: each dim d of size s repeated r times is a new dim of r in front of
// it, broadcast, then merged: reshape [1, s0, 1, s1 ...], expand to
// [r0, s0, r1, s1 ...], reshape [r0 s0, r1 s1 ...].
absl::Status ConvertTile(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.ConstantInts(n, 1));
  const std::vector<int64_t>& s = x->type.shape;
  if (repeats.size() != s.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (Tile): one repeat per dim"));
  }
  std::vector<int64_t> spread, wide, joined;
  for (size_t d = 0; d < s.size(); ++d) {
    if (repeats[d] < 0 || repeats[d] > (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Tile): repeat ",
                                                     repeats[d], " is out of range"));
    }
    spread.insert(spread.end(), {1, s[d]});
    wide.insert(wide.end(), {repeats[d], s[d]});
    joined.push_back(repeats[d] * s[d]);
  }
  KILN_ASSIGN_OR_RETURN(Node* a, c.Add(n, "reshape", {x}, ReshapeAttrs{spread}, "/spread"));
  KILN_ASSIGN_OR_RETURN(Node* e, c.Add(n, "expand", {a}, ReshapeAttrs{wide}, "/repeat"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {e}, ReshapeAttrs{joined}));
  return c.Define(n.output(0), y);
}

// Trilu: x where the (row, column) position keeps it, else 0; the mask is
// a constant of the last two dims.
absl::Status ConvertTrilu(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  int64_t k = 0;
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, c.ConstantInts(n, 1));
    if (kv.size() != 1) return absl::InvalidArgumentError("Trilu's k is a scalar");
    k = kv[0];
  }
  const int rank = static_cast<int>(x->type.rank());
  if (rank < 2) return absl::InvalidArgumentError("Trilu wants at least 2 dims");
  const int64_t rows = x->type.shape[rank - 2], cols = x->type.shape[rank - 1];
  const bool upper = IntAttr(n, "upper", 1) != 0;
  std::vector<char> keep(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) keep[i * cols + j] = upper ? j - i >= k : j - i <= k;
  }
  Node* mask = c.Constant(n.name() + "/mask", TensorType{DType::kBool, {rows, cols}}, keep.data());
  const int64_t zero_int = 0;
  Node* zero = x->type.dtype == DType::kInt64
                   ? c.Constant(n.name() + "/zero", TensorType{DType::kInt64, {}}, &zero_int)
                   : c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "where", {mask, x, zero}));
  return c.Define(n.output(0), y);
}

ConvertFn Reduce(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    std::vector<int64_t> axes = IntsAttr(n, "axes", {});
    if (c.HasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(axes, c.ConstantInts(n, 1));
    }
    if (axes.empty() && IntAttr(n, "noop_with_empty_axes", 0)) return c.Define(n.output(0), x);
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, kiln_op, {x},
                                         ReduceAttrs{axes, IntAttr(n, "keepdims", 1) != 0}));
    return c.Define(n.output(0), y);
  };
}

// mean over H and W, kept: sum then scale.
absl::Status ConvertGlobalAveragePool(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (x->type.rank() < 3) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (GlobalAveragePool): input ",
                                                   x->type.ToString(), " has no spatial dims"));
  }
  // Over every spatial dim: NCL (1-D audio nets), NCHW, NCDHW.
  std::vector<int64_t> axes;
  int64_t count = 1;
  for (int64_t d = 2; d < x->type.rank(); ++d) {
    axes.push_back(d);
    count *= x->type.shape[d];
  }
  KILN_ASSIGN_OR_RETURN(Node* s, c.Add(n, "sum", {x}, ReduceAttrs{axes, true}, "/sum"));
  const double scale = 1.0 / static_cast<double>(count);
  KILN_ASSIGN_OR_RETURN(
      Node * y, c.Add(n, "mul", {s, c.ScalarOf(n.name() + "/scale", s->type.dtype, scale)}));
  return c.Define(n.output(0), y);
}

// Constant: a tensor (`value`), or opset 12's scalar and list forms
// (value_float, value_floats, value_int, value_ints). Sparse and string
// values are Unimplemented.
absl::Status ConvertConstant(Converter& c, const onnx::NodeProto& n) {
  if (const onnx::AttributeProto* value = FindAttr(n, "value"); value && value->has_t()) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConstantData> data, ConvertTensor(value->t()));
    return c.Define(n.output(0), c.graph().AddConstant(n.output(0), std::move(data)));
  }
  if (const onnx::AttributeProto* f = FindAttr(n, "value_float")) {
    const float v = f->f();
    return c.Define(n.output(0), c.Constant(n.output(0), TensorType{DType::kFloat32, {}}, &v));
  }
  if (const onnx::AttributeProto* i = FindAttr(n, "value_int")) {
    const int64_t v = i->i();
    return c.Define(n.output(0), c.Constant(n.output(0), TensorType{DType::kInt64, {}}, &v));
  }
  if (const onnx::AttributeProto* fs = FindAttr(n, "value_floats")) {
    const std::vector<float> v(fs->floats().begin(), fs->floats().end());
    const TensorType type{DType::kFloat32, {static_cast<int64_t>(v.size())}};
    return c.Define(n.output(0), c.Constant(n.output(0), type, v.data()));
  }
  if (const onnx::AttributeProto* is = FindAttr(n, "value_ints")) {
    const std::vector<int64_t> v(is->ints().begin(), is->ints().end());
    const TensorType type{DType::kInt64, {static_cast<int64_t>(v.size())}};
    return c.Define(n.output(0), c.Constant(n.output(0), type, v.data()));
  }
  return absl::UnimplementedError(absl::StrCat(
      "node '", n.name(), "' (Constant): sparse and string values are not supported"));
}

// Variadic elementwise ops folded pairwise (Sum, Min, Max).
ConvertFn Fold(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* acc, c.Value(n, 0));
    for (int i = 1; i < n.input_size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
      KILN_ASSIGN_OR_RETURN(acc, c.Add(n, kiln_op, {acc, v}, NoAttrs{},
                                       i + 1 < n.input_size() ? absl::StrCat("/", i) : ""));
    }
    return c.Define(n.output(0), acc);
  };
}

ConvertFn Activation(const std::string& kiln_op, const char* alpha, float alpha_default,
                     const char* beta, float beta_default) {
  return [=](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    ActivationAttrs a{FloatAttr(n, alpha, alpha_default), FloatAttr(n, beta, beta_default)};
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, kiln_op, {x}, a));
    return c.Define(n.output(0), y);
  };
}

// A constant float operand's values (Resize's scales: a constant, folded,
// or decided by model inputs, each value then a variant); empty when the
// operand is absent or an empty tensor.
absl::StatusOr<std::vector<float>> ConstantFloats(Converter& c, const onnx::NodeProto& n, int i) {
  if (!c.HasInput(n, i)) return std::vector<float>{};
  KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
  if (v->type.NumElements() == 0) return std::vector<float>{};
  KILN_ASSIGN_OR_RETURN(v, c.ConstantOperand(n, i));
  if (v->type.dtype != DType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                 "): scales must be a float constant"));
  }
  const float* p = v->value->data<float>();
  return std::vector<float>(p, p + v->type.NumElements());
}

// Resize (opset 10+) and Upsample (7-9), nearest, linear and cubic, as a
// gather along each resized axis with index tables (linear: two gathers
// blended by a weight table; cubic: four weighted taps) worked out here in
// double precision: exactly ONNX's coordinate arithmetic, and ordinary
// injective ops that fuse. All three are separable, so bilinear is linear
// along H, then along W, and bicubic likewise.
absl::Status ConvertResize(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  const std::vector<int64_t>& in = x->type.shape;
  const int rank = static_cast<int>(in.size());
  const bool upsample = n.op_type() == "Upsample";
  auto unsupported = [&](const std::string& what) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                 ", opset ", c.opset(), "): ", what));
  };
  // Where scales and sizes come from, by op and opset.
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (upsample && c.opset() < 9) {
    for (float f : FindAttr(n, "scales") ? FindAttr(n, "scales")->floats()
                                         : google::protobuf::RepeatedField<float>()) {
      scales.push_back(f);
    }
  } else if (upsample || c.opset() < 11) {
    KILN_ASSIGN_OR_RETURN(scales, ConstantFloats(c, n, 1));
  } else {
    KILN_ASSIGN_OR_RETURN(scales, ConstantFloats(c, n, 2));
    if (scales.empty() && c.HasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(sizes, c.ConstantInts(n, 3));
    }
  }
  if (static_cast<int>(scales.size()) != rank && static_cast<int>(sizes.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): needs one scale or size per dim of its ",
                                                   rank, "-D input"));
  }
  const std::string mode = StringAttr(n, "mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear" && mode != "cubic") {
    return unsupported(absl::StrCat("mode '", mode, "' (nearest, linear and cubic are supported)"));
  }
  const double cubic_a = FloatAttr(n, "cubic_coeff_a", -0.75f);
  const bool exclude_outside = IntAttr(n, "exclude_outside", 0) != 0;
  const bool opset10_like = upsample || c.opset() < 11;
  const std::string coordinates =
      opset10_like ? "asymmetric" : StringAttr(n, "coordinate_transformation_mode", "half_pixel");
  const std::string nearest = opset10_like ? "floor"
                                           : StringAttr(n, "nearest_mode", "round_prefer_floor");
  if (coordinates != "half_pixel" && coordinates != "asymmetric" &&
      coordinates != "align_corners" && coordinates != "pytorch_half_pixel" &&
      coordinates != "tf_crop_and_resize") {
    return unsupported(absl::StrCat("coordinate_transformation_mode '", coordinates, "'"));
  }
  // tf_crop_and_resize: the region of interest, [starts..., ends...] in
  // coordinates normalised to [0, 1] per dim (input 1, a constant), and
  // the value of output positions whose source falls outside the input.
  const bool crop = coordinates == "tf_crop_and_resize";
  std::vector<float> roi;
  if (crop) {
    KILN_ASSIGN_OR_RETURN(roi, ConstantFloats(c, n, 1));
    if (static_cast<int>(roi.size()) != 2 * rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n.name(), "' (", n.op_type(), "): tf_crop_and_resize needs ",
                       2 * rank, " roi values (a start and an end per dim), got ", roi.size()));
    }
  }
  const float extrapolation = FloatAttr(n, "extrapolation_value", 0.0f);
  Node* y = x;
  for (int d = 0; d < rank; ++d) {
    const int64_t out =
        sizes.empty() ? static_cast<int64_t>(std::floor(in[d] * static_cast<double>(scales[d])))
                      : sizes[d];
    const double scale = sizes.empty() ? scales[d] : static_cast<double>(out) / in[d];
    if (out < 1 || out > (int64_t{1} << 31) || !(scale > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): dim ", d, " resized to ", out));
    }
    const double roi_start = crop ? roi[d] : 0.0, roi_end = crop ? roi[rank + d] : 1.0;
    if (out == in[d] && scale == 1.0 && roi_start == 0.0 && roi_end == 1.0) continue;
    auto original = [&](int64_t o) -> double {
      if (crop) {
        const double last = static_cast<double>(in[d] - 1);
        return out == 1 ? 0.5 * (roi_start + roi_end) * last
                        : roi_start * last + o * (roi_end - roi_start) * last / (out - 1);
      }
      if (coordinates == "asymmetric") return o / scale;
      if (coordinates == "align_corners") {
        return out == 1 ? 0.0 : o * static_cast<double>(in[d] - 1) / (out - 1);
      }
      if (coordinates == "pytorch_half_pixel" && out == 1) return 0.0;
      return (o + 0.5) / scale - 0.5;
    };
    auto clamp = [&](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in[d] - 1); };
    std::vector<int64_t> lower(out), upper(out);
    std::vector<double> weight(out);
    // Cubic: four taps at floor(x) - 1 ... floor(x) + 2 with Keys' weights
    // (ONNX's cubic_coeff_a); exclude_outside drops taps past the edge and
    // renormalises, else they read the edge element.
    std::vector<std::vector<int64_t>> taps(4, std::vector<int64_t>(out));
    std::vector<std::vector<double>> tap_weights(4, std::vector<double>(out));
    // Positions whose source lies outside the input (tf_crop_and_resize
    // only) take the extrapolation value, after the taps.
    std::vector<char> inside(out, 1);
    bool any_outside = false;
    for (int64_t o = 0; o < out; ++o) {
      const double xo = original(o);
      if (crop && (xo < 0 || xo > static_cast<double>(in[d] - 1))) {
        inside[o] = 0;
        any_outside = true;
      }
      if (mode == "cubic") {
        const double f = std::floor(xo), t = xo - f;
        const double a = cubic_a;
        const double dist[4] = {t + 1, t, 1 - t, 2 - t};
        double total = 0;
        for (int k = 0; k < 4; ++k) {
          const double z = dist[k];
          double w = z <= 1 ? ((a + 2) * z - (a + 3)) * z * z + 1
                            : ((a * z - 5 * a) * z + 8 * a) * z - 4 * a;
          const int64_t i = static_cast<int64_t>(f) - 1 + k;
          if (exclude_outside && (i < 0 || i >= in[d])) w = 0;
          taps[k][o] = clamp(i);
          tap_weights[k][o] = w;
          total += w;
        }
        if (exclude_outside && total != 0) {
          for (int k = 0; k < 4; ++k) tap_weights[k][o] /= total;
        }
      } else if (mode == "nearest") {
        double i = nearest == "floor"                ? std::floor(xo)
                   : nearest == "ceil"               ? std::ceil(xo)
                   : nearest == "round_prefer_ceil"  ? std::floor(xo + 0.5)
                                                     : std::ceil(xo - 0.5);
        lower[o] = clamp(static_cast<int64_t>(i));
      } else {
        const double f = std::floor(xo);
        lower[o] = clamp(static_cast<int64_t>(f));
        upper[o] = clamp(static_cast<int64_t>(f) + 1);
        weight[o] = xo - f;
      }
    }
    const std::string axis = absl::StrCat("/resize_", d);
    auto table = [&](const std::string& name, const std::vector<int64_t>& v) {
      return c.Constant(n.name() + axis + name, TensorType{DType::kInt64, {out}}, v.data());
    };
    // Weights in x's type, shaped [out, 1, ...] to broadcast along d.
    std::vector<int64_t> wshape{out};
    for (int k = d + 1; k < rank; ++k) wshape.push_back(1);
    auto weights = [&](const std::string& name, const std::vector<double>& v) {
      const TensorType type{x->type.dtype, wshape};
      std::string bytes(type.ByteSize(), '\0');
      for (int64_t o = 0; o < out; ++o) WriteElementFromDouble(type.dtype, bytes.data(), o, v[o]);
      return c.Constant(n.name() + axis + name, type, bytes.data());
    };
    if (mode == "cubic") {
      Node* sum = nullptr;
      for (int k = 0; k < 4; ++k) {
        const std::string tap = absl::StrCat(axis, "/tap", k);
        KILN_ASSIGN_OR_RETURN(Node* g, c.Add(n, "gather", {y, table(tap + "_at", taps[k])},
                                             AxisAttrs{d}, tap + "_gather"));
        KILN_ASSIGN_OR_RETURN(g, c.Add(n, "mul", {g, weights(tap + "_weight", tap_weights[k])},
                                       NoAttrs{}, tap + "_weighted"));
        if (sum == nullptr) {
          sum = g;
        } else {
          KILN_ASSIGN_OR_RETURN(sum, c.Add(n, "add", {sum, g}, NoAttrs{}, tap + "_sum"));
        }
      }
      y = sum;
    } else {
      KILN_ASSIGN_OR_RETURN(Node* low, c.Add(n, "gather", {y, table("/lower", lower)},
                                             AxisAttrs{d}, axis + "/gather_lower"));
      if (mode == "nearest") {
        y = low;
      } else {
        KILN_ASSIGN_OR_RETURN(Node* high, c.Add(n, "gather", {y, table("/upper", upper)},
                                                AxisAttrs{d}, axis + "/gather_upper"));
        // y = low + (high - low) * w.
        Node* w = weights("/weight", weight);
        KILN_ASSIGN_OR_RETURN(Node* diff,
                              c.Add(n, "sub", {high, low}, NoAttrs{}, axis + "/diff"));
        KILN_ASSIGN_OR_RETURN(Node* step, c.Add(n, "mul", {diff, w}, NoAttrs{}, axis + "/step"));
        KILN_ASSIGN_OR_RETURN(y, c.Add(n, "add", {low, step}, NoAttrs{}, axis + "/blend"));
      }
    }
    // Axis by axis agrees with ONNX's reference, which interpolates the
    // inner dims first: a position outside along one dim is the
    // extrapolation value whatever the other dims did, since blending
    // extrapolated values gives the value back (exactly for nearest and
    // linear; cubic's four weights sum to 1 within rounding).
    if (any_outside) {
      Node* mask = c.Constant(n.name() + axis + "/inside", TensorType{DType::kBool, wshape},
                              inside.data());
      Node* value = c.ScalarOf(n.name() + axis + "/extrapolation", x->type.dtype, extrapolation);
      KILN_ASSIGN_OR_RETURN(y, c.Add(n, "where", {mask, y, value}, NoAttrs{}, axis + "/crop"));
    }
  }
  return c.Define(n.output(0), y);
}

absl::Status ConvertIsInf(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  // is_inf's ActivationAttrs: alpha detects +inf, beta -inf.
  const ActivationAttrs detect{IntAttr(n, "detect_positive", 1) != 0 ? 1.0f : 0.0f,
                               IntAttr(n, "detect_negative", 1) != 0 ? 1.0f : 0.0f};
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "is_inf", {x}, detect));
  return c.Define(n.output(0), y);
}

absl::Status ConvertMod(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* a, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 1));
  const int64_t fmod = IntAttr(n, "fmod", 0);
  if (fmod != 0 && fmod != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (Mod): fmod = ", fmod, " is not 0 or 1"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "mod", {a, b}, ModAttrs{fmod == 1}));
  return c.Define(n.output(0), y);
}

absl::Status ConvertClip(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  ActivationAttrs a{FloatAttr(n, "min", -INFINITY), FloatAttr(n, "max", INFINITY)};
  bool constant_bounds = x->type.dtype == DType::kFloat32;
  for (int i : {1, 2}) {  // opset 11+: min and max are inputs
    if (!c.HasInput(n, i)) continue;
    KILN_ASSIGN_OR_RETURN(Node* bound, c.Value(n, i));
    if (!bound->is_constant() || bound->type.dtype != DType::kFloat32 ||
        bound->type.NumElements() != 1) {
      constant_bounds = false;
      continue;
    }
    (i == 1 ? a.alpha : a.beta) = *bound->value->data<float>();
  }
  if (constant_bounds) {
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "clip", {x}, a));
    return c.Define(n.output(0), y);
  }
  // Bounds that are tensors (or an integer x): max with the lower, then min
  // with the upper, as ONNX defines Clip.
  if (!c.HasInput(n, 1) && !c.HasInput(n, 2)) return c.Define(n.output(0), x);
  Node* y = x;
  for (int i : {1, 2}) {
    if (!c.HasInput(n, i)) continue;
    KILN_ASSIGN_OR_RETURN(Node* bound, c.Value(n, i));
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, i == 1 ? "maximum" : "minimum", {y, bound}, NoAttrs{},
                                   i == 1 && c.HasInput(n, 2) ? "/low" : ""));
  }
  return c.Define(n.output(0), y);
}

absl::Status ConvertCast(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(
      DType to, ConvertElemType(static_cast<int32_t>(IntAttr(n, "to", 0)),
                                absl::StrCat("node '", n.name(), "' (Cast): target type")));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "cast", {x}, CastAttrs{to}));
  return c.Define(n.output(0), y);
}

// CastLike: a Cast to the element type of input 1 (only its type is read).
absl::Status ConvertCastLike(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* like, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "cast", {x}, CastAttrs{like->type.dtype}));
  return c.Define(n.output(0), y);
}

ConvertFn Softmaxish(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    const int64_t rank = x->type.rank();
    KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", c.opset() >= 13 ? -1 : 1, rank));
    if (c.opset() < 13 && axis != rank - 1) {
      // Before opset 13 these flatten to 2-D around `axis`; that equals a
      // last-axis softmax only when axis is the last one.
      return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   ", opset ", c.opset(), "): axis ", axis,
                                                   " is not the last"));
    }
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, kiln_op, {x}, AxisAttrs{axis}));
    return c.Define(n.output(0), y);
  };
}

// Squeeze / Unsqueeze become reshapes: shapes are static.
absl::Status ConvertSqueeze(Converter& c, const onnx::NodeProto& n, bool unsqueeze) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  std::vector<int64_t> axes = IntsAttr(n, "axes", {});
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(axes, c.ConstantInts(n, 1));
  }
  std::vector<int64_t> shape = x->type.shape;
  if (unsqueeze) {
    const int64_t out_rank = x->type.rank() + static_cast<int64_t>(axes.size());
    for (int64_t& a : axes) a = a < 0 ? a + out_rank : a;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) {
      if (a < 0 || a > static_cast<int64_t>(shape.size())) {
        return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "': bad axis ", a));
      }
      shape.insert(shape.begin() + a, 1);
    }
  } else {
    std::vector<bool> drop(shape.size(), axes.empty());
    for (int64_t a : axes) {
      if (a < 0) a += x->type.rank();
      if (a < 0 || a >= x->type.rank() || shape[a] != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", n.name(), "': cannot squeeze axis ", a));
      }
      drop[a] = true;
    }
    std::vector<int64_t> kept;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!(drop[d] && shape[d] == 1)) kept.push_back(shape[d]);
    }
    shape = kept;
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {x}, ReshapeAttrs{shape}));
  return c.Define(n.output(0), y);
}

absl::Status ConvertConcat(Converter& c, const onnx::NodeProto& n) {
  std::vector<Node*> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
    inputs.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "concat", inputs, AxisAttrs{IntAttr(n, "axis", 0)}));
  return c.Define(n.output(0), y);
}

ConvertFn Pool(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    std::vector<int64_t> kernel = IntsAttr(n, "kernel_shape", {});
    if (x->type.rank() == 5 && kernel.size() == 3 &&
        (n.output_size() < 2 || n.output(1).empty())) {
      return ConvertVolumePool(c, n, x, kiln_op == "avg_pool2d");
    }
    // 1-D pooling runs as 2-D over a plane of height 1 (as ConvertConv1D).
    const bool one_d = x->type.rank() == 3 && kernel.size() == 1;
    if (!one_d && (x->type.rank() != 4 || kernel.size() != 2)) {
      return absl::UnimplementedError(
          absl::StrCat("node '", n.name(), "' (", n.op_type(),
                       "): only 1-D, 2-D and 3-D pooling are supported"));
    }
    auto lift = [one_d](std::vector<int64_t> v, int64_t unit) {
      if (!one_d) return v;
      if (v.size() == 1) return std::vector<int64_t>{unit, v[0]};
      if (v.size() == 2) return std::vector<int64_t>{0, v[0], 0, v[1]};  // pads
      return v;
    };
    kernel = lift(kernel, 1);
    Node* input = x;
    if (one_d) {
      const std::vector<int64_t>& xs = x->type.shape;
      KILN_ASSIGN_OR_RETURN(input, c.Add(n, "reshape", {x},
                                         ReshapeAttrs{{xs[0], xs[1], 1, xs[2]}}, "/x_2d"));
    }
    const bool indices = n.output_size() > 1 && !n.output(1).empty();
    Pool2DAttrs a;
    a.kernel = kernel;
    const std::vector<int64_t> ones = one_d ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1};
    const std::vector<int64_t> zeros = one_d ? std::vector<int64_t>{0, 0}
                                             : std::vector<int64_t>{0, 0, 0, 0};
    a.strides = lift(IntsAttr(n, "strides", ones), 1);
    a.padding = lift(IntsAttr(n, "pads", zeros), 0);
    a.dilation = lift(IntsAttr(n, "dilations", ones), 1);
    a.ceil_mode = IntAttr(n, "ceil_mode", 0) != 0;
    a.count_include_pad = IntAttr(n, "count_include_pad", 0) != 0;
    KILN_RETURN_IF_ERROR(CheckWindowAttrs(n, a.strides, a.dilation, a.padding));
    const onnx::AttributeProto* auto_pad = FindAttr(n, "auto_pad");
    if (auto_pad && (auto_pad->s() == "SAME_UPPER" || auto_pad->s() == "SAME_LOWER")) {
      const bool upper = auto_pad->s() == "SAME_UPPER";
      for (int d = 0; d < 2; ++d) {
        std::tie(a.padding[d], a.padding[d + 2]) = SamePadding(
            input->type.shape[2 + d], a.kernel[d], a.strides[d], a.dilation[d], upper);
      }
    } else if (auto_pad && auto_pad->s() == "VALID") {
      a.padding = {0, 0, 0, 0};
    }
    // MaxPool's Indices: flattened positions in the input (the 1-D view's
    // height of 1 leaves them as they are).
    a.column_major_indices = IntAttr(n, "storage_order", 0) != 0;
    std::vector<std::pair<std::string, int>> wanted{{kiln_op, 0}};
    if (indices) wanted.push_back({"max_pool2d_indices", 1});
    for (const auto& [op, k] : wanted) {
      const std::string suffix = k == 0 ? "" : "/indices";
      KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, op, {input}, a, suffix + (one_d ? "/2d" : "")));
      if (one_d) {
        const std::vector<int64_t> ys = y->type.shape;
        KILN_ASSIGN_OR_RETURN(y, c.Add(n, "reshape", {y}, ReshapeAttrs{{ys[0], ys[1], ys[3]}},
                                       suffix));
      }
      KILN_RETURN_IF_ERROR(c.Define(n.output(k), y));
    }
    return absl::OkStatus();
  };
}

absl::Status ConvertGather(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* data, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* indices, c.Value(n, 1));
  if (indices->type.dtype != DType::kInt64) {
    return absl::UnimplementedError(
        absl::StrCat("node '", n.name(), "' (Gather): int64 indices only"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "gather", {data, indices},
                                       AxisAttrs{IntAttr(n, "axis", 0)}));
  KILN_ASSIGN_OR_RETURN(y, c.Folded(y));
  return c.Define(n.output(0), y);
}

// ONNX's (starts, ends, axes, steps), clamped as the spec says, as Kiln's
// per-dim (start, step, size).
absl::Status AddSlice(Converter& c, const onnx::NodeProto& n, Node* x,
                      std::vector<int64_t> starts, std::vector<int64_t> ends,
                      std::vector<int64_t> axes, std::vector<int64_t> steps,
                      const std::string& output, const std::string& suffix) {
  const int64_t rank = x->type.rank();
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name(), "' (Slice): lengths differ"));
  }
  SliceAttrs a;
  a.starts.assign(rank, 0);
  a.steps.assign(rank, 1);
  a.sizes = x->type.shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank || steps[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n.name(), "' (Slice): bad axis or step"));
    }
    const int64_t dim = x->type.shape[axis];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t size;
    if (steps[i] > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      size = end > start ? (end - start + steps[i] - 1) / steps[i] : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      size = start > end ? (start - end - steps[i] - 1) / -steps[i] : 0;
    }
    a.starts[axis] = size > 0 ? start : 0;
    a.steps[axis] = steps[i];
    a.sizes[axis] = size;
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "slice", {x}, a, suffix));
  KILN_ASSIGN_OR_RETURN(y, c.Folded(y));
  return c.Define(output, y);
}

absl::Status ConvertSlice(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = IntsAttr(n, "starts", {});
    ends = IntsAttr(n, "ends", {});
    axes = IntsAttr(n, "axes", {});
  } else {
    KILN_ASSIGN_OR_RETURN(starts, c.ConstantInts(n, 1));
    KILN_ASSIGN_OR_RETURN(ends, c.ConstantInts(n, 2));
    if (c.HasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(axes, c.ConstantInts(n, 3));
    }
    if (c.HasInput(n, 4)) {
      KILN_ASSIGN_OR_RETURN(steps, c.ConstantInts(n, 4));
    }
  }
  return AddSlice(c, n, x, starts, ends, axes, steps, n.output(0), "");
}

absl::Status ConvertSplit(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  int64_t axis = IntAttr(n, "axis", 0);
  if (axis < 0) axis += x->type.rank();
  if (axis < 0 || axis >= x->type.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Split): bad axis"));
  }
  std::vector<int64_t> sizes = IntsAttr(n, "split", {});
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(sizes, c.ConstantInts(n, 1));
  }
  const int64_t dim = x->type.shape[axis];
  const int64_t parts = n.output_size();
  if (sizes.empty()) {
    const int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t p = 0, at = 0; p < parts; ++p, at += chunk) {
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - at)));
    }
  }
  if (static_cast<int64_t>(sizes.size()) != parts) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Split): ",
                                                   sizes.size(), " sizes for ", parts, " outputs"));
  }
  int64_t at = 0;
  for (int64_t p = 0; p < parts; ++p) {
    KILN_RETURN_IF_ERROR(AddSlice(c, n, x, {at}, {at + sizes[p]}, {axis}, {1}, n.output(p),
                                  absl::StrCat("/", p)));
    at += sizes[p];
  }
  return absl::OkStatus();
}

absl::Status ConvertPad(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  PadAttrs a;
  const std::string mode = StringAttr(n, "mode", "constant");
  std::optional<PadAttrs::Mode> named = PadModeNamed(mode);
  if (!named) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (Pad): mode '", mode,
                                                 "'"));
  }
  a.mode = *named;
  a.pads = IntsAttr(n, "pads", {});
  a.value = FloatAttr(n, "value", 0);
  std::vector<Node*> inputs{x};
  if (c.opset() >= 11) {
    KILN_ASSIGN_OR_RETURN(a.pads, c.ConstantInts(n, 1));
    if (c.HasInput(n, 2) && a.mode == PadAttrs::Mode::kConstant) {
      KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, 2));
      if (v->is_constant() && v->type.NumElements() == 1) {
        a.value = static_cast<float>(ReadElementAsDouble(v->type.dtype, v->value->bytes.data(), 0));
        // Values a float cannot hold exactly (a large int64 or a double) are read at run time.
        char back[8] = {};
        WriteElementFromDouble(v->type.dtype, back, 0, a.value);
        if (std::memcmp(back, v->value->bytes.data(), DTypeSize(v->type.dtype)) != 0) {
          inputs.push_back(v);
        }
      } else {
        inputs.push_back(v);
      }
    }
    if (c.HasInput(n, 3)) {
      return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (Pad): axes input"));
    }
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "pad", inputs, a));
  return c.Define(n.output(0), y);
}

absl::Status ConvertConstantOfShape(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ConstantInts(n, 0));
  TensorType type{DType::kFloat32, shape};
  std::string fill(4, '\0');
  const onnx::AttributeProto* value = FindAttr(n, "value");
  if (value && value->has_t()) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConstantData> v, ConvertTensor(value->t()));
    type.dtype = v->type.dtype;
    fill = v->bytes.substr(0, DTypeSize(type.dtype));
  } else if (type.dtype == DType::kFloat32) {
    fill.assign(4, '\0');
  }
  absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok() || *count > (int64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (ConstantOfShape): shape too large"));
  }
  std::string bytes;
  for (int64_t i = 0; i < *count; ++i) bytes += fill;
  return c.Define(n.output(0), c.Constant(n.output(0), type, bytes.data()));
}

// LayerNormalization (opset 17) written out: (x - mean) / sqrt(var + eps) * scale + bias
// over the trailing axes; FuseOps then makes it one kernel.
absl::Status ConvertLayerNorm(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* scale, c.Value(n, 1));
  const int64_t rank = x->type.rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", -1, rank));
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  const float eps = FloatAttr(n, "epsilon", 1e-5f);
  KILN_ASSIGN_OR_RETURN(Node* mean, c.Add(n, "mean", {x}, ReduceAttrs{axes, true}, "/mean"));
  KILN_ASSIGN_OR_RETURN(Node* centered, c.Add(n, "sub", {x, mean}, NoAttrs{}, "/centered"));
  KILN_ASSIGN_OR_RETURN(Node* sq, c.Add(n, "mul", {centered, centered}, NoAttrs{}, "/square"));
  KILN_ASSIGN_OR_RETURN(Node* var, c.Add(n, "mean", {sq}, ReduceAttrs{axes, true}, "/var"));
  KILN_ASSIGN_OR_RETURN(Node * shifted,
                        c.Add(n, "add", {var, c.ScalarOf(n.name() + "/eps", var->type.dtype, eps)},
                              NoAttrs{}, "/var_eps"));
  KILN_ASSIGN_OR_RETURN(Node* std_dev, c.Add(n, "sqrt", {shifted}, NoAttrs{}, "/std"));
  KILN_ASSIGN_OR_RETURN(Node* normed, c.Add(n, "div", {centered, std_dev}, NoAttrs{}, "/normed"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "mul", {normed, scale}, NoAttrs{},
                                       c.HasInput(n, 2) ? "/scaled" : ""));
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(Node* bias, c.Value(n, 2));
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "add", {y, bias}));
  }
  // The optional Mean and InvStdDev outputs (kept dims, as ONNX shapes them).
  if (n.output_size() > 1 && !n.output(1).empty()) {
    KILN_RETURN_IF_ERROR(c.Define(n.output(1), mean));
  }
  if (n.output_size() > 2 && !n.output(2).empty()) {
    KILN_ASSIGN_OR_RETURN(Node* inv, c.Add(n, "reciprocal", {std_dev}, NoAttrs{}, "/inv_std"));
    KILN_RETURN_IF_ERROR(c.Define(n.output(2), inv));
  }
  return c.Define(n.output(0), y);
}

// [len, 1, ...] holding 0..len-1, with `trailing` dims of 1: each position
// along an axis, broadcast against the dims that follow it.
Node* PositionTable(Converter& c, const onnx::NodeProto& n, int64_t len, int64_t trailing) {
  std::vector<int64_t> positions(static_cast<size_t>(len)), shape{len};
  for (int64_t i = 0; i < len; ++i) positions[i] = i;
  for (int64_t d = 0; d < trailing; ++d) shape.push_back(1);
  return c.Constant(n.name() + "/positions", TensorType{DType::kInt64, shape}, positions.data());
}

// The first (with `last`, the last) position along `axis` where x equals its
// max (or min), as int64: the extreme, then the least (greatest) of the
// positions holding it, a position past either end standing for the rest.
absl::StatusOr<Node*> ExtremePosition(Converter& c, const onnx::NodeProto& n, Node* x,
                                      int64_t axis, bool max, bool last, bool keep,
                                      Node* positions, const std::string& suffix) {
  const int64_t outside = last ? -1 : x->type.shape[axis];
  Node* none = c.Constant(n.name() + "/none", TensorType{DType::kInt64, {}}, &outside);
  KILN_ASSIGN_OR_RETURN(Node* extreme, c.Add(n, max ? "max" : "min", {x},
                                             ReduceAttrs{{axis}, true}, "/extreme"));
  KILN_ASSIGN_OR_RETURN(Node* hit, c.Add(n, "equal", {x, extreme}, NoAttrs{}, "/hit"));
  KILN_ASSIGN_OR_RETURN(Node* at, c.Add(n, "where", {hit, positions, none}, NoAttrs{}, "/at"));
  return c.Add(n, last ? "max" : "min", {at}, ReduceAttrs{{axis}, keep}, suffix);
}

// Hardmax: 1 at the first maximum along `axis` (opset 13; before, over the
// flattened trailing dims), 0 elsewhere.
absl::Status ConvertHardmax(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (!IsFloatDType(x->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (Hardmax): float only"));
  }
  const int64_t rank = x->type.rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", c.opset() >= 13 ? -1 : 1, rank));
  Node* flat = x;
  std::vector<int64_t> shape = x->type.shape;
  if (c.opset() < 13) {  // coerced to 2-D [prod(dims before axis), prod(dims from axis)]
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : cols) *= shape[d];
    KILN_ASSIGN_OR_RETURN(flat, c.Add(n, "reshape", {x}, ReshapeAttrs{{rows, cols}}, "/2d"));
    axis = 1;
  }
  Node* where_at =
      PositionTable(c, n, flat->type.shape[axis], flat->type.rank() - axis - 1);
  KILN_ASSIGN_OR_RETURN(Node* first, ExtremePosition(c, n, flat, axis, /*max=*/true,
                                                     /*last=*/false, /*keep=*/true, where_at,
                                                     "/first"));
  KILN_ASSIGN_OR_RETURN(Node* is_first, c.Add(n, "equal", {where_at, first}, NoAttrs{},
                                              "/is_first"));
  Node* one = c.ScalarOf(n.name() + "/one", x->type.dtype, 1);
  Node* zero = c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "where", {is_first, one, zero}, NoAttrs{},
                                       c.opset() < 13 ? "/flat" : ""));
  if (c.opset() < 13) {
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "reshape", {y}, ReshapeAttrs{shape}));
  }
  return c.Define(n.output(0), y);
}

// (x - mean) / sqrt(mean((x - mean)^2)) over `axes` (default N, H, W).
absl::Status ConvertMeanVarianceNorm(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  const std::vector<int64_t> axes = IntsAttr(n, "axes", {0, 2, 3});
  KILN_ASSIGN_OR_RETURN(Node* mean, c.Add(n, "mean", {x}, ReduceAttrs{axes, true}, "/mean"));
  KILN_ASSIGN_OR_RETURN(Node* centred, c.Add(n, "sub", {x, mean}, NoAttrs{}, "/centred"));
  KILN_ASSIGN_OR_RETURN(Node* sq, c.Add(n, "mul", {centred, centred}, NoAttrs{}, "/square"));
  KILN_ASSIGN_OR_RETURN(Node* var, c.Add(n, "mean", {sq}, ReduceAttrs{axes, true}, "/var"));
  KILN_ASSIGN_OR_RETURN(Node* sd, c.Add(n, "sqrt", {var}, NoAttrs{}, "/sd"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "div", {centred, sd}));
  return c.Define(n.output(0), y);
}

// LRN: x / (bias + alpha / size * (sum of x^2 over the `size` channels
// around))^beta. The channel window sum is an average pool over a
// [N, 1, C, H*W] view (padding counted), times size.
absl::Status ConvertLrn(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (x->type.rank() != 4 || !IsFloatDType(x->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (LRN): 4-D float only"));
  }
  const int64_t size = IntAttr(n, "size", 1);
  if (size < 1 || size > x->type.shape[1] * 2 + 1) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (LRN): size ", size));
  }
  const std::vector<int64_t>& s = x->type.shape;
  KILN_ASSIGN_OR_RETURN(Node* sq, c.Add(n, "mul", {x, x}, NoAttrs{}, "/square"));
  KILN_ASSIGN_OR_RETURN(Node* view, c.Add(n, "reshape", {sq},
                                          ReshapeAttrs{{s[0], 1, s[1], s[2] * s[3]}}, "/view"));
  Pool2DAttrs window;
  window.kernel = {size, 1};
  window.padding = {(size - 1) / 2, 0, size - 1 - (size - 1) / 2, 0};
  window.count_include_pad = true;
  KILN_ASSIGN_OR_RETURN(Node* avg, c.Add(n, "avg_pool2d", {view}, window, "/window_mean"));
  KILN_ASSIGN_OR_RETURN(Node* back, c.Add(n, "reshape", {avg}, ReshapeAttrs{s}, "/back"));
  KILN_ASSIGN_OR_RETURN(
      Node* scaled, c.Add(n, "mul", {back, c.ScalarOf(n.name() + "/alpha", x->type.dtype,
                                                         FloatAttr(n, "alpha", 1e-4f))},
                          NoAttrs{}, "/scaled"));
  KILN_ASSIGN_OR_RETURN(
      Node* base, c.Add(n, "add", {scaled, c.ScalarOf(n.name() + "/bias", x->type.dtype,
                                                         FloatAttr(n, "bias", 1.0f))},
                        NoAttrs{}, "/base"));
  KILN_ASSIGN_OR_RETURN(
      Node* denom, c.Add(n, "pow", {base, c.ScalarOf(n.name() + "/beta", x->type.dtype,
                                                        FloatAttr(n, "beta", 0.75f))},
                         NoAttrs{}, "/denominator"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "div", {x, denom}));
  return c.Define(n.output(0), y);
}

// OneHot: `on` where the position along the new `axis` equals the index
// (negative counts from depth), `off` elsewhere; depth and values constant.
absl::Status ConvertOneHot(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* indices, c.Value(n, 0));
  // Constants, folded, or decided by model inputs (each value a variant).
  KILN_ASSIGN_OR_RETURN(Node* depth_node, c.ConstantOperand(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* values, c.ConstantOperand(n, 2));
  if (depth_node->type.NumElements() != 1 || values->type.NumElements() != 2) {
    return absl::UnimplementedError(absl::StrCat(
        "node '", n.name(), "' (OneHot): depth must be one value and values two"));
  }
  const int64_t depth =
      ReadElementAsInt(depth_node->type.dtype, depth_node->value->bytes.data(), 0);
  if (depth < 1 || depth > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (OneHot): depth ",
                                                   depth, " is out of range"));
  }
  const int64_t out_rank = indices->type.rank() + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", -1, out_rank));
  Node* idx = indices;
  if (idx->type.dtype != DType::kInt64) {
    KILN_ASSIGN_OR_RETURN(idx, c.Add(n, "cast", {idx}, CastAttrs{DType::kInt64}, "/int"));
  }
  const int64_t zero = 0;
  Node* zero_node = c.Constant(n.name() + "/zero", TensorType{DType::kInt64, {}}, &zero);
  Node* depth_const = c.Constant(n.name() + "/depth", TensorType{DType::kInt64, {}}, &depth);
  KILN_ASSIGN_OR_RETURN(Node* negative, c.Add(n, "less", {idx, zero_node}, NoAttrs{}, "/neg"));
  KILN_ASSIGN_OR_RETURN(Node* wrapped, c.Add(n, "add", {idx, depth_const}, NoAttrs{}, "/wrap"));
  KILN_ASSIGN_OR_RETURN(idx, c.Add(n, "where", {negative, wrapped, idx}, NoAttrs{}, "/index"));
  std::vector<int64_t> with_axis = indices->type.shape;
  with_axis.insert(with_axis.begin() + axis, 1);
  KILN_ASSIGN_OR_RETURN(idx, c.Add(n, "reshape", {idx}, ReshapeAttrs{with_axis}, "/spread"));
  Node* where_at = PositionTable(c, n, depth, out_rank - axis - 1);
  KILN_ASSIGN_OR_RETURN(Node* hit, c.Add(n, "equal", {idx, where_at}, NoAttrs{}, "/hit"));
  const TensorType one{values->type.dtype, {}};
  const char* v = values->value->bytes.data();
  const size_t item = DTypeSize(values->type.dtype);
  Node* off = c.Constant(n.name() + "/off", one, v);
  Node* on = c.Constant(n.name() + "/on", one, v + item);
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "where", {hit, on, off}));
  return c.Define(n.output(0), y);
}

// Size: the element count, a constant int64 scalar.
absl::Status ConvertSize(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  const int64_t count = x->type.NumElements();
  return c.Define(n.output(0),
                  c.Constant(n.output(0), TensorType{DType::kInt64, {}}, &count));
}

// Shrink: x - bias above lambd, x + bias below -lambd, 0 between.
absl::Status ConvertShrink(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (!IsFloatDType(x->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (Shrink): float only"));
  }
  const float lambd = FloatAttr(n, "lambd", 0.5f), bias = FloatAttr(n, "bias", 0.0f);
  Node* up = c.ScalarOf(n.name() + "/lambd", x->type.dtype, lambd);
  Node* down = c.ScalarOf(n.name() + "/minus_lambd", x->type.dtype, -lambd);
  Node* b = c.ScalarOf(n.name() + "/bias", x->type.dtype, bias);
  Node* zero = c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
  KILN_ASSIGN_OR_RETURN(Node* above, c.Add(n, "greater", {x, up}, NoAttrs{}, "/above"));
  KILN_ASSIGN_OR_RETURN(Node* below, c.Add(n, "less", {x, down}, NoAttrs{}, "/below"));
  KILN_ASSIGN_OR_RETURN(Node* minus, c.Add(n, "sub", {x, b}, NoAttrs{}, "/minus"));
  KILN_ASSIGN_OR_RETURN(Node* plus, c.Add(n, "add", {x, b}, NoAttrs{}, "/plus"));
  KILN_ASSIGN_OR_RETURN(Node* low, c.Add(n, "where", {below, plus, zero}, NoAttrs{}, "/low"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "where", {above, minus, low}));
  return c.Define(n.output(0), y);
}

// Variadic Mean: the sum of the inputs over their count.
absl::Status ConvertMean(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* y, c.Value(n, 0));
  for (int i = 1; i < n.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
    KILN_ASSIGN_OR_RETURN(y, c.Add(n, "add", {y, v}, NoAttrs{}, absl::StrCat("/sum_", i)));
  }
  if (!IsFloatDType(y->type.dtype)) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (Mean): float only"));
  }
  Node* count = c.ScalarOf(n.name() + "/count", y->type.dtype, n.input_size());
  KILN_ASSIGN_OR_RETURN(y, c.Add(n, "div", {y, count}));
  return c.Define(n.output(0), y);
}

// ArgMax / ArgMin along `axis`: the first (or with select_last_index the
// last) position where the element equals the extreme, as int64; two
// reductions over a constant position table.
ConvertFn ArgExtreme(bool max) {
  return [max](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
    if (x->type.dtype == DType::kBool) {
      return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): numeric tensors only"));
    }
    const int64_t rank = x->type.rank();
    KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", 0, rank));
    const bool keep = IntAttr(n, "keepdims", 1) != 0;
    const bool last = IntAttr(n, "select_last_index", 0) != 0;
    Node* positions = PositionTable(c, n, x->type.shape[axis], rank - axis - 1);
    KILN_ASSIGN_OR_RETURN(Node* y,
                          ExtremePosition(c, n, x, axis, max, last, keep, positions, ""));
    return c.Define(n.output(0), y);
  };
}

absl::Status ConvertEinsum(Converter& c, const onnx::NodeProto& n) {
  std::vector<Node*> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Node* v, c.Value(n, i));
    inputs.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "einsum", inputs,
                                       EinsumAttrs{StringAttr(n, "equation", "")}));
  return c.Define(n.output(0), y);
}

absl::Status ConvertGatherNd(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* data, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* indices, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "gather_nd", {data, indices},
                                       AxisAttrs{IntAttr(n, "batch_dims", 0)}));
  return c.Define(n.output(0), y);
}

absl::StatusOr<ScatterAttrs> ScatterAttrsOf(const onnx::NodeProto& n, int64_t rank) {
  ScatterAttrs a;
  KILN_ASSIGN_OR_RETURN(a.axis, AxisAttr(n, "axis", 0, std::max<int64_t>(rank, 1)));
  const std::string reduction = StringAttr(n, "reduction", "none");
  std::optional<ScatterAttrs::Reduction> named = ScatterReductionNamed(reduction);
  if (!named) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): reduction '", reduction, "'"));
  }
  a.reduction = *named;
  return a;
}

// ScatterElements (and the older Scatter), ScatterND.
ConvertFn Scatter(const std::string& kiln_op) {
  return [kiln_op](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    std::vector<Node*> in(3);
    for (int i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(in[i], c.Value(n, i));
    }
    KILN_ASSIGN_OR_RETURN(ScatterAttrs a, ScatterAttrsOf(n, in[0]->type.rank()));
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, kiln_op, in, a));
    return c.Define(n.output(0), y);
  };
}

// TopK: k from its constant input (opset 10+) or attribute; values and
// indices, largest first (or smallest), ties to the lower index.
absl::Status ConvertTopK(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  TopKAttrs a;
  KILN_ASSIGN_OR_RETURN(a.axis, AxisAttr(n, "axis", -1, std::max<int64_t>(x->type.rank(), 1)));
  a.largest = IntAttr(n, "largest", 1) != 0;
  a.k = IntAttr(n, "k", 1);
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> k, c.ConstantInts(n, 1));
    if (k.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (TopK): k must be "
                                                     "one value"));
    }
    a.k = k[0];
  }
  KILN_ASSIGN_OR_RETURN(Node* values, c.Add(n, "top_k_values", {x}, a, "/values"));
  KILN_ASSIGN_OR_RETURN(Node* indices, c.Add(n, "top_k_indices", {x}, a, "/indices"));
  KILN_RETURN_IF_ERROR(c.Define(n.output(0), values));
  return c.Define(n.output_size() > 1 ? n.output(1) : "", indices);
}

absl::Status ConvertGridSample(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* grid, c.Value(n, 1));
  GridSampleAttrs a;
  const std::string mode = StringAttr(n, "mode", "bilinear");
  const std::string padding = StringAttr(n, "padding_mode", "zeros");
  std::optional<GridSampleAttrs::Mode> named_mode = GridSampleModeNamed(mode);
  std::optional<GridSampleAttrs::Padding> named_padding = GridSamplePaddingNamed(padding);
  if (!named_mode || !named_padding) {
    return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (GridSample): mode '",
                                                 mode, "', padding_mode '", padding, "'"));
  }
  a.mode = *named_mode;
  a.padding = *named_padding;
  a.align_corners = IntAttr(n, "align_corners", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "grid_sample", {x, grid}, a));
  return c.Define(n.output(0), y);
}

absl::Status ConvertReverseSequence(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* lengths, c.Value(n, 1));
  ReverseSequenceAttrs a{IntAttr(n, "batch_axis", 1), IntAttr(n, "time_axis", 0)};
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reverse_sequence", {x, lengths}, a));
  return c.Define(n.output(0), y);
}

// BitShift: direction "LEFT" or "RIGHT" on unsigned integers.
absl::Status ConvertBitShift(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* amount, c.Value(n, 1));
  const std::string direction = StringAttr(n, "direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (BitShift): direction '",
                                                   direction, "' (LEFT or RIGHT)"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, direction == "LEFT" ? "shift_left" : "shift_right",
                                       {x, amount}));
  return c.Define(n.output(0), y);
}

// CumSum: the axis is a constant input (a scalar).
absl::Status ConvertCumSum(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axis, c.ConstantInts(n, 1));
  if (axis.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (CumSum): axis must be one value"));
  }
  ScanAttrs a{axis[0], IntAttr(n, "exclusive", 0) != 0, IntAttr(n, "reverse", 0) != 0};
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "cumsum", {x}, a));
  return c.Define(n.output(0), y);
}

// EyeLike: ones on diagonal k of a 2-D shape, a constant of `dtype` (the
// input's type unless given): only the input's shape is read.
absl::Status ConvertEyeLike(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (x->type.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (EyeLike): input ",
                                                   x->type.ToString(), " is not 2-D"));
  }
  DType dtype = x->type.dtype;
  if (FindAttr(n, "dtype") != nullptr) {
    KILN_ASSIGN_OR_RETURN(dtype, ConvertElemType(static_cast<int32_t>(IntAttr(n, "dtype", 0)),
                                                 absl::StrCat("node '", n.name(), "' (EyeLike)")));
  }
  const int64_t k = IntAttr(n, "k", 0);
  const TensorType type{dtype, x->type.shape};
  std::string bytes(type.ByteSize(), '\0');
  for (int64_t i = 0; i < type.shape[0]; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < type.shape[1])
      WriteElementFromInt(dtype, bytes.data(), i * type.shape[1] + j, 1);
  }
  return c.Define(n.output(0), c.Constant(n.output(0), type, bytes.data()));
}

// Range(start, limit, delta): its length depends on the values, so they
// must be constants or decided by integer model inputs (the model is then
// specialised per value, as for Reshape's shape); the result is a constant.
absl::Status ConvertRange(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* start_node, c.Value(n, 0));
  const DType dtype = start_node->type.dtype;
  std::vector<double> v[3];
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(v[i], c.ConstantDoubles(n, i));
    if (v[i].size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Range): input ", i,
                                                     " must be a scalar"));
    }
  }
  const double start = v[0][0], limit = v[1][0], delta = v[2][0];
  const double steps = std::ceil((limit - start) / delta);
  if (delta == 0 || !std::isfinite(steps) || steps > double{1 << 24}) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (Range): start ",
                                                   start, ", limit ", limit, ", delta ", delta,
                                                   " do not give at most 2^24 values"));
  }
  const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
  const TensorType type{dtype, {count}};
  std::string bytes(type.ByteSize(), '\0');
  for (int64_t i = 0; i < count; ++i) {
    if (IsFloatDType(dtype)) {
      WriteElementFromDouble(dtype, bytes.data(), i, start + static_cast<double>(i) * delta);
    } else {
      WriteElementFromInt(dtype, bytes.data(), i,
                          static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
    }
  }
  return c.Define(n.output(0), c.Constant(n.output(0), type, bytes.data()));
}

// HannWindow, HammingWindow, BlackmanWindow (opset 17): a constant of the
// size the input holds, periodic (default) or symmetric, as ONNX defines
// them: sum over terms of (-1)^j a_j cos(2 pi j i / N), N = size (periodic)
// or size - 1 (symmetric).
ConvertFn Window(std::vector<double> coefficients) {
  return [coefficients](Converter& c, const onnx::NodeProto& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> size, c.ConstantInts(n, 0));
    if (size.size() != 1 || size[0] < 0 || size[0] > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): size must be one value in [0, 2^24]"));
    }
    KILN_ASSIGN_OR_RETURN(
        DType dtype, ConvertElemType(static_cast<int32_t>(IntAttr(n, "output_datatype",
                                                                  onnx::TensorProto::FLOAT)),
                                     absl::StrCat("node '", n.name(), "' (", n.op_type(), ")")));
    const bool periodic = IntAttr(n, "periodic", 1) != 0;
    const double denominator = static_cast<double>(periodic ? size[0] : size[0] - 1);
    const TensorType type{dtype, {size[0]}};
    std::string bytes(type.ByteSize(), '\0');
    for (int64_t i = 0; i < size[0]; ++i) {
      double v = 0;
      for (size_t j = 0; j < coefficients.size(); ++j) {
        const double sign = j % 2 == 0 ? 1 : -1;
        v += sign * coefficients[j] *
             std::cos(2 * M_PI * static_cast<double>(j) * static_cast<double>(i) / denominator);
      }
      WriteElementFromDouble(dtype, bytes.data(), i, v);
    }
    return c.Define(n.output(0), c.Constant(n.output(0), type, bytes.data()));
  };
}

// Shapes are static, so Shape is a constant.
absl::Status ConvertShape(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  int64_t rank = x->type.rank();
  int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(x->type.shape.begin() + start, x->type.shape.begin() + end);
  Node* shape = c.Constant(n.output(0),
                           TensorType{DType::kInt64, {static_cast<int64_t>(dims.size())}},
                           dims.data());
  return c.Define(n.output(0), shape);
}

}  // namespace

const ConverterMap& ConverterTable() {
  static const ConverterMap* table = [] {
    auto* t = new ConverterMap{
      {"Add", Simple("add")},
      {"Sub", Simple("sub")},
      {"Mul", Simple("mul")},
      {"Div", Simple("div")},
      {"Relu", Simple("relu")},
      {"Sigmoid", Simple("sigmoid")},
      {"Tanh", Simple("tanh")},
      {"Exp", Simple("exp")},
      {"Log", Simple("log")},
      {"Sqrt", Simple("sqrt")},
      {"Neg", Simple("neg")},
      {"Identity", ConvertIdentity},
      {"Dropout", ConvertDropout},
      {"Gemm", ConvertGemm},
      {"MatMul", ConvertMatMul},
      {"Softmax", Softmaxish("softmax")},
      {"Reshape", WithShapeOperand("reshape")},
      {"Flatten", ConvertFlatten},
      {"Transpose", ConvertTranspose},
      {"Conv", ConvertConv},
      {"BatchNormalization", ConvertBatchNorm},
      {"ReduceSum", Reduce("sum")},
      {"ReduceMax", Reduce("max")},
      {"GlobalAveragePool", ConvertGlobalAveragePool},
      {"Constant", ConvertConstant},
      {"Abs", Simple("abs")},
      {"Reciprocal", Simple("reciprocal")},
      {"Pow",
       [](Converter& c, const onnx::NodeProto& n) -> absl::Status {
         KILN_ASSIGN_OR_RETURN(Node* base, c.Value(n, 0));
         KILN_ASSIGN_OR_RETURN(Node* exponent, c.Value(n, 1));
         if (base->type.dtype == exponent->type.dtype) return Simple("pow")(c, n);
         if (base->type.dtype == DType::kBool || exponent->type.dtype == DType::kBool) {
           return absl::UnimplementedError(absl::StrCat(
               "node '", n.name(), "' (Pow, opset ", c.opset(), "): bool operands"));
         }
         // Mixed types (opset 12+): computed in float, the result in the
         // base's type.
         const DType out = base->type.dtype;
         if (base->type.dtype != DType::kFloat32) {
           KILN_ASSIGN_OR_RETURN(base, c.Add(n, "cast", {base}, CastAttrs{DType::kFloat32},
                                             "/base_float"));
         }
         if (exponent->type.dtype != DType::kFloat32) {
           KILN_ASSIGN_OR_RETURN(exponent, c.Add(n, "cast", {exponent},
                                                 CastAttrs{DType::kFloat32}, "/exponent_float"));
         }
         KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "pow", {base, exponent}, NoAttrs{},
                                              out == DType::kFloat32 ? "" : "/float"));
         if (out != DType::kFloat32) {
           KILN_ASSIGN_OR_RETURN(y, c.Add(n, "cast", {y}, CastAttrs{out}));
         }
         return c.Define(n.output(0), y);
       }},
      {"Erf", Simple("erf")},
      {"Floor", Simple("floor")},
      {"Equal", Simple("equal")},
      {"Less", Simple("less")},
      {"Greater", Simple("greater")},
      {"Where", Simple("where")},
      {"HardSwish", Simple("hard_swish")},
      {"Sum", Fold("add")},
      {"Min", Fold("minimum")},
      {"Max", Fold("maximum")},
      {"LeakyRelu", Activation("leaky_relu", "alpha", 0.01f, "", 0)},
      {"HardSigmoid", Activation("hard_sigmoid", "alpha", 0.2f, "beta", 0.5f)},
      {"Clip", ConvertClip},
      {"Cast", ConvertCast},
      {"CastLike", ConvertCastLike},
      {"LogSoftmax", Softmaxish("log_softmax")},
      {"BitShift", ConvertBitShift},
      {"GatherND", ConvertGatherNd},
      {"GridSample", ConvertGridSample},
      {"ReverseSequence", ConvertReverseSequence},
      {"ScatterElements", Scatter("scatter_elements")},
      {"Scatter", Scatter("scatter_elements")},
      {"ScatterND", Scatter("scatter_nd")},
      {"TopK", ConvertTopK},
      {"Einsum", ConvertEinsum},
      {"CumSum", ConvertCumSum},
      {"EyeLike", ConvertEyeLike},
      {"Range", ConvertRange},
      {"HannWindow", Window({0.5, 0.5})},
      {"HammingWindow", Window({25.0 / 46, 21.0 / 46})},
      {"BlackmanWindow", Window({0.42, 0.5, 0.08})},
      {"ReduceMean", Reduce("mean")},
      {"ReduceMin", Reduce("min")},
      {"Squeeze",
       [](Converter& c, const onnx::NodeProto& n) { return ConvertSqueeze(c, n, false); }},
      {"Unsqueeze",
       [](Converter& c, const onnx::NodeProto& n) { return ConvertSqueeze(c, n, true); }},
      {"Concat", ConvertConcat},
      {"MaxPool", Pool("max_pool2d")},
      {"AveragePool", Pool("avg_pool2d")},
      {"Shape", ConvertShape},
      {"Gather", ConvertGather},
      {"Slice", ConvertSlice},
      {"Split", ConvertSplit},
      {"Expand", WithShapeOperand("expand")},
      {"Pad", ConvertPad},
      {"ConstantOfShape", ConvertConstantOfShape},
      {"LayerNormalization", ConvertLayerNorm},
      {"Sin", Simple("sin")},
      {"Cos", Simple("cos")},
      {"Tan", Simple("tan")},
      {"Asin", Simple("asin")},
      {"Acos", Simple("acos")},
      {"Atan", Simple("atan")},
      {"Sinh", Simple("sinh")},
      {"Cosh", Simple("cosh")},
      {"Asinh", Simple("asinh")},
      {"Acosh", Simple("acosh")},
      {"Atanh", Simple("atanh")},
      {"Round", Simple("round")},
      {"Ceil", Simple("ceil")},
      {"Sign", Simple("sign")},
      {"Softplus", Simple("softplus")},
      {"Softsign", Simple("softsign")},
      {"Elu", Activation("elu", "alpha", 1.0f, "", 0)},
      {"Selu", Activation("selu", "alpha", 1.67326319217681884765625f, "gamma",
                          1.05070102214813232421875f)},
      {"Celu", Activation("celu", "alpha", 1.0f, "", 0)},
      {"ThresholdedRelu", Activation("thresholded_relu", "alpha", 1.0f, "", 0)},
      {"IsNaN", Simple("is_nan")},
      {"IsInf", ConvertIsInf},
      {"And", Simple("logical_and")},
      {"Or", Simple("logical_or")},
      {"Xor", Simple("logical_xor")},
      {"Not", Simple("logical_not")},
      {"Mod", ConvertMod},
      {"Resize", ConvertResize},
      {"ConvTranspose", ConvertConvTranspose},
      {"ReduceL1", ComposedReduce("l1")},
      {"ReduceL2", ComposedReduce("l2")},
      {"ReduceSumSquare", ComposedReduce("sum_square")},
      {"ReduceLogSum", ComposedReduce("log_sum")},
      {"ReduceLogSumExp", ComposedReduce("log_sum_exp")},
      {"ReduceProd", ComposedReduce("prod")},
      {"PRelu", ConvertPRelu},
      {"GlobalMaxPool", ConvertGlobalMaxPool},
      {"InstanceNormalization", ConvertInstanceNorm},
      {"DepthToSpace", ConvertDepthSpace},
      {"SpaceToDepth", ConvertDepthSpace},
      {"Tile", ConvertTile},
      {"Trilu", ConvertTrilu},
      {"Size", ConvertSize},
      {"Hardmax", ConvertHardmax},
      {"LRN", ConvertLrn},
      {"OneHot", ConvertOneHot},
      {"MeanVarianceNormalization", ConvertMeanVarianceNorm},
      {"GatherElements",
       [](Converter& c, const onnx::NodeProto& n) -> absl::Status {
         KILN_ASSIGN_OR_RETURN(Node* data, c.Value(n, 0));
         KILN_ASSIGN_OR_RETURN(Node* indices, c.Value(n, 1));
         if (indices->type.dtype != DType::kInt64) {
           return absl::UnimplementedError(absl::StrCat(
               "node '", n.name(), "' (GatherElements): int64 indices only"));
         }
         KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "gather_elements", {data, indices},
                                              AxisAttrs{IntAttr(n, "axis", 0)}));
         return c.Define(n.output(0), y);
       }},
      {"Shrink", ConvertShrink},
      {"Mean", ConvertMean},
      {"ArgMax", ArgExtreme(true)},
      {"ArgMin", ArgExtreme(false)},
      {"LessOrEqual", Simple("less_equal")},
      {"GreaterOrEqual", Simple("greater_equal")},
      {"Upsample", ConvertResize},
    };
    AddLossConverters(*t);
    AddQuantizedConverters(*t);
    AddRecurrentConverters(*t);
    AddSignalConverters(*t);
    AddComposedConverters(*t);
    AddValueShapeConverters(*t);
    return t;
  }();
  return *table;
}

namespace {

// Integer attributes beyond this are refused before libonnx sees them: no
// real model needs them, and libonnx 1.12's shape inference overflows or
// indexes with them (LayerNormalization axis = INT64_MAX, DepthToSpace
// blocksize = 2^62 crashed the server).
constexpr int64_t kMaxAttributeMagnitude = int64_t{1} << 31;

// Attributes libonnx divides by or sizes loops with: 0 or less raised
// SIGFPE (pool and conv strides of 0) inside its shape inference.
bool MustBePositive(const std::string& attr) {
  return attr == "strides" || attr == "dilations" || attr == "kernel_shape" ||
         attr == "blocksize" || attr == "group";
}

// Refuses, naming node and attribute, the integer attribute values libonnx's
// checker and shape inference cannot be trusted with: they run in-process
// on untrusted bytes.
absl::Status CheckAttributesForLibOnnx(const onnx::GraphProto& graph) {
  for (const onnx::NodeProto& n : graph.node()) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      std::vector<int64_t> values(a.ints().begin(), a.ints().end());
      if (a.type() == onnx::AttributeProto::INT || a.has_i()) values.push_back(a.i());
      // Slice-1's starts and ends are INT64_MAX for "to the end" by
      // convention; its shape inference clamps them.
      const bool open_bound = a.name() == "starts" || a.name() == "ends";
      for (int64_t v : values) {
        const bool positive_needed = MustBePositive(a.name());
        if (open_bound) continue;
        if (v > kMaxAttributeMagnitude || v < -kMaxAttributeMagnitude ||
            (positive_needed && v <= 0)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "node '", n.name(), "' (", n.op_type(), "): attribute ", a.name(), " = ", v,
              positive_needed ? " must be positive" : " is out of range", " (|value| <= 2^31)"));
        }
      }
      if (a.has_g()) {
        if (absl::Status s = CheckAttributesForLibOnnx(a.g()); !s.ok()) return s;
      }
      for (const onnx::GraphProto& g : a.graphs()) {
        if (absl::Status s = CheckAttributesForLibOnnx(g); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RefuseExternalData(const onnx::TensorProto& t, absl::string_view where) {
  if (!KeepsDataOutside(t)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, " '", t.name(),
      "' keeps its data in an external file; Kiln accepts only self-contained models"));
}

absl::Status RefuseExternalData(const onnx::SparseTensorProto& t, absl::string_view where) {
  KILN_RETURN_IF_ERROR(RefuseExternalData(t.values(), where));
  return RefuseExternalData(t.indices(), where);
}

absl::Status RefuseExternalData(const onnx::NodeProto& n);

// Every tensor of the graph and its subgraphs, wherever it sits (issue 20:
// a Constant node's external data made libonnx stat() the path it named,
// telling a client whether any file on the server exists).
absl::Status RefuseExternalData(const onnx::GraphProto& g) {
  for (const onnx::TensorProto& t : g.initializer()) {
    KILN_RETURN_IF_ERROR(RefuseExternalData(t, "initializer"));
  }
  for (const onnx::SparseTensorProto& t : g.sparse_initializer()) {
    KILN_RETURN_IF_ERROR(RefuseExternalData(t, "sparse initializer"));
  }
  for (const onnx::NodeProto& n : g.node()) KILN_RETURN_IF_ERROR(RefuseExternalData(n));
  return absl::OkStatus();
}

absl::Status RefuseExternalData(const onnx::NodeProto& n) {
  const std::string where = absl::StrCat("node '", n.name(), "' attribute tensor");
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.has_t()) KILN_RETURN_IF_ERROR(RefuseExternalData(a.t(), where));
    for (const onnx::TensorProto& t : a.tensors()) {
      KILN_RETURN_IF_ERROR(RefuseExternalData(t, where));
    }
    if (a.has_sparse_tensor()) KILN_RETURN_IF_ERROR(RefuseExternalData(a.sparse_tensor(), where));
    for (const onnx::SparseTensorProto& t : a.sparse_tensors()) {
      KILN_RETURN_IF_ERROR(RefuseExternalData(t, where));
    }
    if (a.has_g()) KILN_RETURN_IF_ERROR(RefuseExternalData(a.g()));
    for (const onnx::GraphProto& g : a.graphs()) KILN_RETURN_IF_ERROR(RefuseExternalData(g));
  }
  return absl::OkStatus();
}

absl::Status RefuseExternalData(const onnx::ModelProto& model) {
  KILN_RETURN_IF_ERROR(RefuseExternalData(model.graph()));
  for (const onnx::FunctionProto& f : model.functions()) {
    for (const onnx::NodeProto& n : f.node()) KILN_RETURN_IF_ERROR(RefuseExternalData(n));
  }
  return absl::OkStatus();
}

// libonnx's checker and shape inference on a model, in process.
absl::Status CheckAndInferHere(onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid ONNX model: ", e.what()));
  }
  return absl::OkStatus();
}

// libonnx's checker and shape inference (CheckAttributesForLibOnnx first),
// judging the model while the importer converts it. They only judge (the
// importer reads none of the shapes they infer), so with the probe they run
// in a child process (crash_probe.h) started before the conversion and
// waited for after it: the child works on the other core while this one
// converts, and a crash kills the child, not the server. The checks before
// them catch the crashes found so far, the child any others. A refusal's
// message comes back from the child, so nothing is run twice. (Starting the
// child before the parse, with the child parsing too, was tried: the parse
// it overlapped is one the child then had to make, for no gain.)
class LibOnnxVerdict {
 public:
  // Starts the checks; without the probe (or when no child can be made)
  // they run here and now, and Start returns their refusal.
  static absl::StatusOr<LibOnnxVerdict> Start(onnx::ModelProto& model, bool probe) {
    LibOnnxVerdict verdict;
    if (probe) {
      // A hostile model can also send libonnx into a long loop (a wild read
      // as a loop bound): 5 s, and 1 s more per 10 MB, is far more than a
      // real model's checks take.
      verdict.limit_ = absl::Seconds(5) +
                       absl::Seconds(static_cast<double>(model.ByteSizeLong()) / 10e6);
      absl::StatusOr<CrashProbe> child = CrashProbe::Start([&model] {
        onnx::checker::check_model(model);
        onnx::shape_inference::InferShapes(model);
      });
      if (child.ok()) {
        verdict.child_.emplace(*std::move(child));
        return verdict;
      }
    }
    KILN_RETURN_IF_ERROR(CheckAndInferHere(model));
    return verdict;
  }

  // The child's verdict (OK when the checks ran in process).
  absl::Status Finish() {
    if (!child_) return absl::OkStatus();
    absl::StatusOr<ProbeEnd> ended = child_->Wait(limit_);
    if (!ended.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model is refused: ONNX's checker or shape inference failed on it in a "
          "sandbox (", ended.status().message(), ")"));
    }
    if (*ended == ProbeEnd::kThrew) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid ONNX model: ", child_->thrown_message()));
    }
    return absl::OkStatus();
  }

 private:
  std::optional<CrashProbe> child_;
  absl::Duration limit_;
};

}  // namespace
}  // namespace onnx_import

using onnx_import::LibOnnxVerdict;
using onnx_import::CheckAttributesForLibOnnx;
using onnx_import::CheckOperatorSupported;
using onnx_import::ConvertElemType;
using onnx_import::Converter;
using onnx_import::ConverterTable;
using onnx_import::ConvertTensor;
using onnx_import::kMaxModelBytes;
using onnx_import::kNeedsValuesPayload;
using onnx_import::RefuseExternalData;

std::vector<std::string> InputsThatDecideShapes(const absl::Status& status) {
  auto names = status.GetPayload(kNeedsValuesPayload);
  if (!names) return {};
  return absl::StrSplit(std::string(*names), '\n', absl::SkipEmpty());
}

std::vector<std::string> SupportedOnnxOps() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : ConverterTable()) names.push_back(name);
  return names;
}

namespace {

absl::StatusOr<onnx::ModelProto> ParseModel(absl::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) > kMaxModelBytes) {
    return absl::InvalidArgumentError("ONNX model is larger than 2 GiB");
  }
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(static_cast<int>(std::min<int64_t>(kMaxModelBytes, INT32_MAX)));
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError("the bytes are not an ONNX ModelProto");
  }
  if (!model.has_graph()) return absl::InvalidArgumentError("the ONNX model has no graph");
  return model;
}

}  // namespace

namespace {

absl::StatusOr<ModelSignature> SignatureOf(const onnx::ModelProto& model,
                                           const OnnxImportOptions& options) {
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  // `fixed`: the dims the user gave for this tensor, if any.
  auto read = [](const onnx::ValueInfoProto& v,
                 const std::vector<int64_t>* fixed) -> absl::StatusOr<TensorSignature> {
    TensorSignature sig;
    sig.name = v.name();
    const auto& tt = v.type().tensor_type();
    KILN_ASSIGN_OR_RETURN(sig.dtype, ConvertElemType(tt.elem_type(), "'" + v.name() + "'"));
    sig.has_shape = tt.has_shape();
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (fixed != nullptr && i < static_cast<int>(fixed->size())) {
        sig.dims.push_back((*fixed)[i]);
        sig.symbols.emplace_back();
      } else if (d.has_dim_value() && d.dim_value() > 0) {
        sig.dims.push_back(d.dim_value());
        sig.symbols.emplace_back();
      } else {
        sig.dims.push_back(TensorSignature::kSymbolicDim);
        sig.symbols.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
    return sig;
  };
  ModelSignature out;
  for (const onnx::ValueInfoProto& in : model.graph().input()) {
    if (initializers.count(in.name()) || !in.type().has_tensor_type()) continue;
    auto given = options.input_shapes.find(in.name());
    KILN_ASSIGN_OR_RETURN(
        TensorSignature sig,
        read(in, given == options.input_shapes.end() ? nullptr : &given->second));
    out.inputs.push_back(std::move(sig));
  }
  for (const onnx::ValueInfoProto& o : model.graph().output()) {
    if (!o.type().has_tensor_type()) continue;
    KILN_ASSIGN_OR_RETURN(TensorSignature sig, read(o, nullptr));
    out.outputs.push_back(std::move(sig));
  }
  return out;
}

// ImportOnnxModel after the parse; takes the initializers' data.
// The opset Kiln's converters follow for `model`: the default-domain opset
// it imports, 7 to 17. Opsets 1 to 6 are read as 7 where every node's
// definition is the one opset 7 has (libonnx's schema registry gives both
// the same since-version): Elu, Selu, Softplus, Not or GlobalAveragePool of
// opset 6 or 1 are the operators of opset 7. A node whose definition changed
// at 7 (the broadcast attribute of Add, say) keeps the model refused, naming
// the node. Refused outside 1 to 17 (0: no default-domain operators).
absl::StatusOr<int64_t> SupportedOpset(const onnx::ModelProto& model) {
  constexpr int64_t kOldest = 7, kNewest = 17;
  int64_t opset = 0;
  bool training = false;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    training |= o.domain() == "ai.onnx.preview.training";
  }
  if (opset == 0 && training) {
    return absl::UnimplementedError(
        "the model's operators are ONNX training operators (ai.onnx.preview.training); "
        "Kiln runs inference only");
  }
  if (opset < 1 || opset > kNewest) {
    return absl::UnimplementedError(
        absl::StrCat("ONNX opset ", opset, " is not supported (", kOldest, " to ", kNewest,
                     " are, and 1 to 6 where the model's operators are defined as in 7)"));
  }
  if (opset >= kOldest) return opset;
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;  // refused elsewhere
    const onnx::OpSchema* declared =
        onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
    if (declared == nullptr) continue;  // CheckArity names it
    const onnx::OpSchema* seventh =
        onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kOldest), "");
    if (seventh == nullptr || seventh->SinceVersion() != declared->SinceVersion()) {
      return absl::UnimplementedError(absl::StrCat(
          "ONNX opset ", opset, " is not supported (node '", n.name(), "' (", n.op_type(),
          ") is defined as in opset ", declared->SinceVersion(),
          ", which changed at 7; Kiln supports the definitions of opsets 7 to ", kNewest, ")"));
    }
  }
  return kOldest;
}

// A node's input and output counts within its ONNX schema's (libonnx's
// registry: data, not the checker). The converters index a node's inputs
// and outputs freely; libonnx's checker enforces the counts too, but Kiln's
// own checks must not rest on it (fuzz/onnx_converter_fuzzer.cc found a
// node without outputs read past its list in a second).
absl::Status CheckArity(const onnx::NodeProto& n, int64_t opset) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
  const std::string what = absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
  if (schema == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not an operator of opset ", opset));
  }
  if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input() ||
      n.output_size() < schema->min_output() || n.output_size() > schema->max_output()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", n.input_size(), " inputs and ", n.output_size(), " outputs; opset ", opset,
        " wants ", schema->min_input(), " to ", schema->max_input(), " inputs and ",
        schema->min_output(), " to ", schema->max_output(), " outputs"));
  }
  return absl::OkStatus();
}

// Kiln's own checks of a model (external data loaded), made before libonnx
// sees it: they refuse what libonnx could crash on, and never crash
// themselves.
absl::Status CheckBeforeLibOnnx(const onnx::ModelProto& model, const OnnxImportOptions& options) {
  KILN_RETURN_IF_ERROR(RefuseExternalData(model));
  KILN_ASSIGN_OR_RETURN(const int64_t opset, SupportedOpset(model));
  KILN_RETURN_IF_ERROR(CheckNodeLimit(int64_t{model.graph().node_size()} +
                                          model.graph().initializer_size() +
                                          model.graph().input_size(),
                                      std::min(options.max_nodes, kMaxGraphNodes)));
  KILN_RETURN_IF_ERROR(CheckAttributesForLibOnnx(model.graph()));
  // Before libonnx: its checker calls an op it does not know invalid, where
  // Kiln's answer for any op it cannot run is Unimplemented.
  for (const onnx::NodeProto& n : model.graph().node()) {
    KILN_RETURN_IF_ERROR(CheckOperatorSupported(n, opset));
    KILN_RETURN_IF_ERROR(CheckArity(n, opset));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> ConvertModel(onnx::ModelProto& model, const OpRegistry& ops,
                                   const OnnxImportOptions& options, int64_t opset);

absl::StatusOr<Graph> ImportParsed(onnx::ModelProto& model, const OpRegistry& ops,
                                   const OnnxImportOptions& options) {
  if (!options.external_data_dir.empty()) {
    KILN_RETURN_IF_ERROR(LoadExternalData(model, options.external_data_dir,
                                          options.max_external_data_bytes));
  }
  KILN_RETURN_IF_ERROR(CheckBeforeLibOnnx(model, options));
  KILN_ASSIGN_OR_RETURN(const int64_t opset, SupportedOpset(model));
  if (!options.libonnx_checks) return ConvertModel(model, ops, options, opset);
  KILN_ASSIGN_OR_RETURN(LibOnnxVerdict verdict,
                        LibOnnxVerdict::Start(model, options.probe_libonnx));
  absl::StatusOr<Graph> graph = ConvertModel(model, ops, options, opset);
  // libonnx's refusal comes first, as when it ran before the conversion.
  KILN_RETURN_IF_ERROR(verdict.Finish());
  return graph;
}

// The parsed, checked model as a Graph. Initializers' bytes are moved out
// of `model`, not copied.
absl::StatusOr<Graph> ConvertModel(onnx::ModelProto& model, const OpRegistry& ops,
                                   const OnnxImportOptions& options, int64_t opset) {
  const onnx::GraphProto& g = model.graph();
  Converter c(ops, opset);
  c.graph().name = g.name();
  std::set<std::string> initializers;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConstantData> data, ConvertTensor(t, &t));
    KILN_RETURN_IF_ERROR(c.Define(t.name(), c.graph().AddConstant(t.name(), std::move(data))));
    initializers.insert(t.name());
  }
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializers.count(in.name())) continue;
    const std::string what = absl::StrCat("input '", in.name(), "'");
    if (!in.type().has_tensor_type()) {
      return absl::UnimplementedError(absl::StrCat(what, " is not a tensor"));
    }
    const auto& tt = in.type().tensor_type();
    TensorType type;
    KILN_ASSIGN_OR_RETURN(type.dtype, ConvertElemType(tt.elem_type(), what));
    auto fixed = options.input_shapes.find(in.name());
    if (fixed != options.input_shapes.end()) {
      if (static_cast<int>(fixed->second.size()) != tt.shape().dim_size()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " has rank ", tt.shape().dim_size(),
                                                       "; --input-shape gives ",
                                                       ShapeToString(fixed->second)));
      }
      type.shape = fixed->second;
    } else {
      for (const auto& d : tt.shape().dim()) {
        type.shape.push_back(d.has_dim_value() ? d.dim_value() : options.default_symbolic_dim);
      }
    }
    absl::StatusOr<int64_t> n = CheckedNumElements(type.shape);
    if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
    if (auto value = options.input_values.find(in.name()); value != options.input_values.end()) {
      // An input that decides shapes: its value is part of this compile.
      // Given as int64s whatever the input's type (the server decodes INT32
      // values to int64, and float ones to their doubles' bits:
      // model_signature.h): stored back in the input's type.
      const bool is_float = IsFloatDType(type.dtype);
      if ((!IsIntegerDType(type.dtype) && !is_float && type.dtype != DType::kBool) ||
          static_cast<int64_t>(value->second.size()) != *n) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " (", type.ToString(), ") cannot take the ", value->second.size(),
            " values given for it"));
      }
      std::string bytes(type.ByteSize(), '\0');
      for (size_t k = 0; k < value->second.size(); ++k) {
        if (is_float) {
          WriteElementFromDouble(type.dtype, bytes.data(), k,
                                 DoubleFromDecidingValue(value->second[k]));
        } else {
          WriteElementFromInt(type.dtype, bytes.data(), k, value->second[k]);
        }
      }
      KILN_RETURN_IF_ERROR(
          c.Define(in.name(), c.Constant(in.name(), std::move(type), bytes.data())));
      continue;
    }
    KILN_RETURN_IF_ERROR(c.Define(in.name(), c.graph().AddInput(in.name(), std::move(type))));
  }
  for (const onnx::NodeProto& n : g.node()) {
    absl::Status converted = c.ConvertNode(n);
    if (Converter::IsWaiting(converted)) {
      c.MarkWaiting(n);
      continue;
    }
    KILN_RETURN_IF_ERROR(converted);
  }
  if (!c.needed_values().empty()) {
    const std::vector<std::string> names(c.needed_values().begin(), c.needed_values().end());
    absl::Status s = absl::UnimplementedError(absl::StrCat(
        "the model's input", names.size() > 1 ? "s " : " '", absl::StrJoin(names, "', '"),
        "' decide", names.size() > 1 ? "" : "s", " shapes (as a Reshape's shape or Slice's "
        "bounds); the model compiles per value on first use"));
    s.SetPayload(kNeedsValuesPayload, absl::Cord(absl::StrJoin(names, "\n")));
    return s;
  }
  for (const onnx::ValueInfoProto& out : g.output()) {
    onnx::NodeProto probe;
    probe.set_name("graph output");
    probe.add_input(out.name());
    KILN_ASSIGN_OR_RETURN(Node* v, c.Value(probe, 0));
    c.graph().AddOutput(v, out.name());
  }
  // Outputs keep the names the model declares, whatever node produced them.
  Graph result = std::move(c.graph());
  KILN_RETURN_IF_ERROR(VerifyGraph(result));
  return result;
}

}  // namespace

absl::StatusOr<ModelSignature> ReadOnnxSignature(absl::string_view bytes,
                                                 const OnnxImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes));
  return SignatureOf(model, options);
}

absl::StatusOr<Graph> ImportOnnxModel(absl::string_view bytes, const OpRegistry& ops,
                                      const OnnxImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes));
  return ImportParsed(model, ops, options);
}

absl::StatusOr<OnnxModelImport> ImportOnnxModelWithSignature(
    absl::string_view bytes, const OpRegistry& ops, const OnnxImportOptions& options,
    const ShapesForSignature& shapes_for) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes));
  OnnxModelImport out;
  KILN_ASSIGN_OR_RETURN(out.signature, SignatureOf(model, options));
  absl::StatusOr<std::map<std::string, std::vector<int64_t>>> shapes = shapes_for(out.signature);
  if (!shapes.ok()) return shapes.status();
  OnnxImportOptions at = options;
  for (const auto& [input, dims] : *shapes) at.input_shapes[input] = dims;
  out.graph = ImportParsed(model, ops, at);
  return out;
}

}  // namespace kiln
