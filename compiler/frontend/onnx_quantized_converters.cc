// Quantised ONNX operators: QuantizeLinear, DequantizeLinear (per tensor and
// per axis), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger
// and QLinearConv, composed from elementwise ops (which fuse around the
// products) and integer or float32 products.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {


// A per-axis parameter (1-D, one value per channel of `axis`) as a view that
// broadcasts against a tensor of `rank`; a scalar (or one-element) parameter
// as it is.
absl::StatusOr<Node*> AlongAxis(Converter& c, const onnx::NodeProto& n, Node* p, int64_t axis,
                                int64_t rank, const std::string& suffix) {
  if (p->type.NumElements() == 1 && p->type.rank() <= 1) {
    if (p->type.rank() == 0) return p;
    return c.Add(n, "reshape", {p}, ReshapeAttrs{{}}, suffix);
  }
  // Per axis, the axis must exist: a scalar ConvInteger weight with a
  // two-element zero point asked for axis 0 of rank 0, and the view below
  // wrote its dim into an empty shape.
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", n.name(), "' (", n.op_type(), "): a per-axis quantisation parameter ",
        p->type.ToString(), " along axis ", axis, " of a rank-", rank, " tensor"));
  }
  if (p->type.rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): a quantisation parameter ",
                                                   p->type.ToString(),
                                                   " must be a scalar or 1-D"));
  }
  std::vector<int64_t> shape(rank - axis, 1);
  shape[0] = p->type.shape[0];
  return c.Add(n, "reshape", {p}, ReshapeAttrs{shape}, suffix);
}

// A scale that is a constant must be positive and finite: a zero scale
// would divide by zero in every element.
absl::Status CheckScale(const onnx::NodeProto& n, const Node* scale) {
  if (!IsFloatDType(scale->type.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): scale must be float, got ",
                                                   scale->type.ToString()));
  }
  if (!scale->is_constant()) return absl::OkStatus();
  for (int64_t i = 0; i < scale->type.NumElements(); ++i) {
    const double v = ReadElementAsDouble(scale->type.dtype, scale->value->bytes.data(), i);
    if (!(v > 0) || std::isinf(v)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): scale ", v, " (element ", i,
                                                     ") must be positive and finite"));
    }
  }
  return absl::OkStatus();
}

// The range a quantised type saturates to.
std::pair<float, float> QuantizedRange(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return {-128.0f, 127.0f};
    case DType::kUInt8: return {0.0f, 255.0f};
    case DType::kInt16: return {-32768.0f, 32767.0f};
    case DType::kUInt16: return {0.0f, 65535.0f};
    default: return {-2147483648.0f, 2147483520.0f};  // int32, as far as float32 reaches
  }
}

// saturate(round_half_even(x / scale) + zero_point) in `to`; x float32.
absl::StatusOr<Node*> Requantize(Converter& c, const onnx::NodeProto& n, Node* x, Node* scale,
                                 Node* zero_point, DType to, const std::string& suffix) {
  KILN_ASSIGN_OR_RETURN(Node* q, c.Add(n, "div", {x, scale}, NoAttrs{}, suffix + "/scaled"));
  KILN_ASSIGN_OR_RETURN(q, c.Add(n, "round", {q}, NoAttrs{}, suffix + "/rounded"));
  if (zero_point != nullptr) {
    KILN_ASSIGN_OR_RETURN(Node* zp, c.Add(n, "cast", {zero_point}, CastAttrs{DType::kFloat32},
                                          suffix + "/zero_point"));
    KILN_ASSIGN_OR_RETURN(q, c.Add(n, "add", {q, zp}, NoAttrs{}, suffix + "/shifted"));
  }
  const auto [low, high] = QuantizedRange(to);
  KILN_ASSIGN_OR_RETURN(q, c.Add(n, "clip", {q}, ActivationAttrs{low, high},
                                 suffix + "/saturated"));
  return c.Add(n, "cast", {q}, CastAttrs{to}, suffix);
}

// (x - zero_point) as float32 (or as int32 with `int32`), per tensor or
// per axis.
absl::StatusOr<Node*> Centered(Converter& c, const onnx::NodeProto& n, Node* x, Node* zero_point,
                               DType as, const std::string& suffix) {
  KILN_ASSIGN_OR_RETURN(Node* v, c.Add(n, "cast", {x}, CastAttrs{as}, suffix + "/wide"));
  if (zero_point == nullptr) return v;
  if (zero_point->type.dtype != x->type.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", n.name(), "' (", n.op_type(), "): zero point ", zero_point->type.ToString(),
        " must have the quantised tensor's type ", DTypeName(x->type.dtype)));
  }
  KILN_ASSIGN_OR_RETURN(Node* zp, c.Add(n, "cast", {zero_point}, CastAttrs{as},
                                        suffix + "/zero_point"));
  return c.Add(n, "sub", {v, zp}, NoAttrs{}, suffix + "/centered");
}

absl::Status ConvertDequantizeLinear(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* scale, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* zero_point, OptionalValue(c, n, 2));
  KILN_RETURN_IF_ERROR(CheckScale(n, scale));
  const int64_t rank = x->type.rank();
  int64_t axis = 0;  // read only for per-axis parameters
  if (scale->type.NumElements() != 1) {
    KILN_ASSIGN_OR_RETURN(axis, AxisAttr(n, "axis", 1, rank));
  }
  Node* given_scale = scale;
  KILN_ASSIGN_OR_RETURN(scale, AlongAxis(c, n, scale, axis, rank, "/scale"));
  if (zero_point != nullptr) {
    KILN_ASSIGN_OR_RETURN(zero_point, AlongAxis(c, n, zero_point, axis, rank, "/zp"));
  }
  KILN_ASSIGN_OR_RETURN(Node* v, Centered(c, n, x, zero_point, DType::kFloat32, "/x"));
  c.NoteDequantized(n.output(0), Converter::Dequantized{v, given_scale, axis});
  if (scale->type.dtype != DType::kFloat32) {
    KILN_ASSIGN_OR_RETURN(scale, c.Add(n, "cast", {scale}, CastAttrs{DType::kFloat32}, "/s32"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "mul", {v, scale}));
  return c.Define(n.output(0), y);
}

// A float32 scale (cast if needed).
absl::StatusOr<Node*> Float32(Converter& c, const onnx::NodeProto& n, Node* v,
                              const std::string& suffix) {
  if (v->type.dtype == DType::kFloat32) return v;
  return c.Add(n, "cast", {v}, CastAttrs{DType::kFloat32}, suffix);
}

// The values of `v` in float64 when it folds to a float constant.
std::optional<std::vector<double>> FloatValues(Converter& c, Node* v) {
  absl::StatusOr<Node*> folded = c.Folded(v);
  if (!folded.ok() || !(*folded)->is_constant() || !IsFloatDType((*folded)->type.dtype)) {
    return std::nullopt;
  }
  const Node* k = *folded;
  std::vector<double> out(k->type.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = ReadElementAsDouble(k->type.dtype, k->value->bytes.data(), static_cast<int64_t>(i));
  }
  return out;
}

// a[i] * b[i] in float64, either one broadcast when it has one value; empty
// when the counts do not match.
std::vector<double> Products(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::max(a.size(), b.size());
  if ((a.size() != n && a.size() != 1) || (b.size() != n && b.size() != 1)) return {};
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = a[a.size() == 1 ? 0 : i] * b[b.size() == 1 ? 0 : i];
  return out;
}

// A float32 constant of `shape` rounding `exact`, which it keeps
// (ConstantData::exact).
Node* ExactConstant(Converter& c, const std::string& name, std::vector<int64_t> shape,
                    std::vector<double> exact) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, std::move(shape)};
  data->bytes.assign(static_cast<size_t>(data->type.ByteSize()), '\0');
  for (size_t i = 0; i < exact.size(); ++i) {
    WriteElementFromDouble(DType::kFloat32, data->bytes.data(), static_cast<int64_t>(i), exact[i]);
  }
  data->exact = std::make_shared<const std::vector<double>>(std::move(exact));
  return c.graph().AddConstant(name, std::move(data));
}

// x_scale * w_scale as ExactConstant when both fold (rank-`rank` shape with
// the channels at `axis` for per-channel values), else null: float64 holds
// the product of two float32 values exactly, float32 rounds it.
Node* ExactScale(Converter& c, const onnx::NodeProto& n, Node* xs, Node* ws, int64_t axis,
                 int64_t rank) {
  const std::optional<std::vector<double>> x = FloatValues(c, xs), w = FloatValues(c, ws);
  if (!x || !w) return nullptr;
  std::vector<double> product = Products(*x, *w);
  if (product.empty()) return nullptr;
  std::vector<int64_t> shape;
  if (product.size() > 1) {
    shape.assign(rank - axis, 1);
    shape[0] = static_cast<int64_t>(product.size());
  }
  return ExactConstant(c, n.name() + "/acc_scale_exact", std::move(shape), std::move(product));
}

// A bias that is a DequantizeLinear of folding integers and scale (QDQ's
// int32 bias) as ExactConstant of their products, shaped as ExactScale's;
// else null.
Node* ExactBias(Converter& c, const onnx::NodeProto& n, int input, int64_t channels, int64_t axis,
                int64_t rank) {
  if (!c.HasInput(n, input)) return nullptr;
  const Converter::Dequantized* b = c.DequantizedFrom(n.input(input));
  if (b == nullptr) return nullptr;
  const std::optional<std::vector<double>> v = FloatValues(c, b->centered);
  const std::optional<std::vector<double>> s = FloatValues(c, b->scale);
  if (!v || !s || static_cast<int64_t>(v->size()) != channels) return nullptr;
  std::vector<double> product = Products(*v, *s);
  if (product.size() != v->size()) return nullptr;
  std::vector<int64_t> shape(rank - axis, 1);
  shape[0] = channels;
  return ExactConstant(c, n.name() + "/bias_exact", std::move(shape), std::move(product));
}

}  // namespace

// The QDQ pattern around a 2-D Conv (DequantizeLinear on its input, per
// tensor, and on its weight, per tensor or per output channel): the
// centered integers convolved (exact in float32 while each sum stays below
// 2^24, as int32 accumulation would be), then scaled once by
// x_scale * w_scale and the bias added. Dequantising first rounds every
// product instead, and a flip of one quantisation step early in a network
// grows to several at its output (qdq_resnet18 in the model zoo). Null when
// the pattern does not apply.
absl::StatusOr<Node*> QuantizedConv2D(Converter& c, const onnx::NodeProto& n, Node* bias) {
  const Converter::Dequantized* x = c.DequantizedFrom(n.input(0));
  const Converter::Dequantized* w = c.DequantizedFrom(n.input(1));
  if (x == nullptr || w == nullptr || x->scale->type.NumElements() != 1 ||
      x->centered->type.rank() != 4 || w->centered->type.rank() != 4 ||
      (w->scale->type.NumElements() != 1 && w->axis != 0)) {
    return nullptr;
  }
  // The centered integers DequantizeLinear already made (its scale aside).
  KILN_ASSIGN_OR_RETURN(Node* acc, Conv2D(c, n, x->centered, w->centered, nullptr));
  // Constant scales and a QDQ bias keep their float64 values for the
  // integer kernels' requantisation (RequantizeInKernel).
  Node* scale = ExactScale(c, n, x->scale, w->scale, 1, 4);
  if (scale == nullptr) {
    KILN_ASSIGN_OR_RETURN(Node* xs, Float32(c, n, x->scale, "/x_scale32"));
    KILN_ASSIGN_OR_RETURN(Node* ws, Float32(c, n, w->scale, "/w_scale32"));
    KILN_ASSIGN_OR_RETURN(scale, c.Add(n, "mul", {xs, ws}, NoAttrs{}, "/acc_scale"));
    KILN_ASSIGN_OR_RETURN(scale, AlongAxis(c, n, scale, 1, 4, "/acc_scale_channels"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "mul", {acc, scale}, NoAttrs{}, "/scaled"));
  if (bias == nullptr) return y;
  Node* b = ExactBias(c, n, 2, acc->type.shape[1], 1, 4);
  if (b == nullptr) {
    KILN_ASSIGN_OR_RETURN(b, AlongAxis(c, n, bias, 1, 4, "/bias_channels"));
  }
  return c.Add(n, "add", {y, b});
}

// The QDQ pattern around Gemm (transB or not, alpha = beta = 1) and a
// MatMul by a 2-D weight: DequantizeLinear on the activation, per tensor,
// and on the weight, per tensor or per output column; the centered integers
// multiplied (exact in float32 under the same 2^24 bound as the conv) and
// scaled once by x_scale * w_scale, then the bias added. As for the conv,
// the centered weights fold to integer constants, which the contraction
// schedule keeps in int8 (contraction_emit.cc). Null when the pattern does
// not apply.
absl::StatusOr<Node*> QuantizedLinear(Converter& c, const onnx::NodeProto& n, bool trans_b,
                                      Node* bias) {
  const Converter::Dequantized* x = c.DequantizedFrom(n.input(0));
  const Converter::Dequantized* w = c.DequantizedFrom(n.input(1));
  if (x == nullptr || w == nullptr || x->scale->type.NumElements() != 1 ||
      x->centered->type.rank() < 2 || w->centered->type.rank() != 2 ||
      (trans_b && x->centered->type.rank() != 2)) {
    return nullptr;
  }
  const int64_t columns_axis = trans_b ? 0 : 1;
  const int64_t columns = w->centered->type.shape[columns_axis];
  if (w->scale->type.NumElements() != 1 &&
      (w->axis != columns_axis || w->scale->type.NumElements() != columns)) {
    return nullptr;
  }
  if (bias != nullptr && bias->type.NumElements() != 1 &&
      bias->type.shape != std::vector<int64_t>{columns}) {
    return nullptr;
  }
  KILN_ASSIGN_OR_RETURN(Node* acc, c.Add(n, trans_b ? "dense" : "matmul",
                                         {x->centered, w->centered}, NoAttrs{}, "/integers"));
  // As for the conv: float64 values kept where the parameters fold.
  Node* scale = ExactScale(c, n, x->scale, w->scale, 0, 1);
  if (scale == nullptr) {
    KILN_ASSIGN_OR_RETURN(Node* xs, Float32(c, n, x->scale, "/x_scale32"));
    KILN_ASSIGN_OR_RETURN(Node* ws, Float32(c, n, w->scale, "/w_scale32"));
    KILN_ASSIGN_OR_RETURN(scale, c.Add(n, "mul", {xs, ws}, NoAttrs{}, "/acc_scale"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "mul", {acc, scale}, NoAttrs{}, "/scaled"));
  if (bias == nullptr) return y;
  if (bias->type.NumElements() == columns) {
    if (Node* b = ExactBias(c, n, 2, columns, 0, 1)) bias = b;
  }
  return c.Add(n, "add", {y, bias});
}

namespace {

absl::Status ConvertQuantizeLinear(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* scale, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* zero_point, OptionalValue(c, n, 2));
  KILN_RETURN_IF_ERROR(CheckScale(n, scale));
  const DType to = zero_point ? zero_point->type.dtype : DType::kUInt8;
  if (to != DType::kUInt8 && to != DType::kInt8) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (QuantizeLinear): zero point type ",
                                                   DTypeName(to), " (uint8 or int8)"));
  }
  const int64_t rank = x->type.rank();
  int64_t axis = 0;  // read only for per-axis parameters
  if (scale->type.NumElements() != 1) {
    KILN_ASSIGN_OR_RETURN(axis, AxisAttr(n, "axis", 1, rank));
  }
  KILN_ASSIGN_OR_RETURN(scale, AlongAxis(c, n, scale, axis, rank, "/scale"));
  if (zero_point != nullptr) {
    KILN_ASSIGN_OR_RETURN(zero_point, AlongAxis(c, n, zero_point, axis, rank, "/zp"));
  }
  if (x->type.dtype != DType::kFloat32) {
    KILN_ASSIGN_OR_RETURN(x, c.Add(n, "cast", {x}, CastAttrs{DType::kFloat32}, "/x32"));
  }
  if (scale->type.dtype != DType::kFloat32) {
    KILN_ASSIGN_OR_RETURN(scale, c.Add(n, "cast", {scale}, CastAttrs{DType::kFloat32}, "/s32"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, Requantize(c, n, x, scale, zero_point, to, ""));
  return c.Define(n.output(0), y);
}

// DynamicQuantizeLinear: uint8 with scale and zero point from x's range
// (extended to include 0), as ONNX defines it.
absl::Status ConvertDynamicQuantizeLinear(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  if (x->type.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (DynamicQuantizeLinear): x must be float"));
  }
  Node* zero = c.ScalarOf(n.name() + "/zero", DType::kFloat32, 0);
  KILN_ASSIGN_OR_RETURN(Node* low, c.Add(n, "min", {x}, ReduceAttrs{{}, false}, "/min"));
  KILN_ASSIGN_OR_RETURN(Node* high, c.Add(n, "max", {x}, ReduceAttrs{{}, false}, "/max"));
  KILN_ASSIGN_OR_RETURN(low, c.Add(n, "minimum", {low, zero}, NoAttrs{}, "/low"));
  KILN_ASSIGN_OR_RETURN(high, c.Add(n, "maximum", {high, zero}, NoAttrs{}, "/high"));
  KILN_ASSIGN_OR_RETURN(Node* span, c.Add(n, "sub", {high, low}, NoAttrs{}, "/span"));
  Node* levels = c.ScalarOf(n.name() + "/levels", DType::kFloat32, 255);
  KILN_ASSIGN_OR_RETURN(Node* scale, c.Add(n, "div", {span, levels}, NoAttrs{}, "/scale"));
  KILN_ASSIGN_OR_RETURN(Node* minus_low, c.Add(n, "neg", {low}, NoAttrs{}, "/minus_low"));
  KILN_ASSIGN_OR_RETURN(Node* zp, Requantize(c, n, minus_low, scale, nullptr, DType::kUInt8,
                                             "/zero_point"));
  KILN_ASSIGN_OR_RETURN(Node* y, Requantize(c, n, x, scale, zp, DType::kUInt8, ""));
  KILN_RETURN_IF_ERROR(c.Define(n.output(0), y));
  KILN_RETURN_IF_ERROR(c.Define(n.output(1), scale));
  return c.Define(n.output(2), zp);
}

// MatMulInteger: (a - a_zero_point) x (b - b_zero_point) in int32, exact
// (int64 accumulation, wrapped to int32 as the type does). a's zero point is
// per tensor or per row (M), b's per tensor or per column (N).
absl::StatusOr<Node*> IntegerProduct(Converter& c, const onnx::NodeProto& n, Node* a, Node* a_zp,
                                     Node* b, Node* b_zp) {
  if (a_zp != nullptr && a_zp->type.rank() == 1 && a_zp->type.NumElements() > 1) {
    KILN_ASSIGN_OR_RETURN(a_zp, c.Add(n, "reshape", {a_zp},
                                      ReshapeAttrs{{a_zp->type.shape[0], 1}}, "/a_zp_rows"));
  }
  KILN_ASSIGN_OR_RETURN(Node* ca, Centered(c, n, a, a_zp, DType::kInt32, "/a"));
  KILN_ASSIGN_OR_RETURN(Node* cb, Centered(c, n, b, b_zp, DType::kInt32, "/b"));
  return c.Add(n, "matmul", {ca, cb}, NoAttrs{}, "/product");
}

absl::Status ConvertMatMulInteger(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* a, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* a_zp, OptionalValue(c, n, 2));
  KILN_ASSIGN_OR_RETURN(Node* b_zp, OptionalValue(c, n, 3));
  KILN_ASSIGN_OR_RETURN(Node* y, IntegerProduct(c, n, a, a_zp, b, b_zp));
  return c.Define(n.output(0), y);
}

// QLinearMatMul: the integer product requantised by a_scale * b_scale /
// y_scale (in float32, as ONNX Runtime does) into y's type.
absl::Status ConvertQLinearMatMul(Converter& c, const onnx::NodeProto& n) {
  std::vector<Node*> in(8);
  for (int i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], c.Value(n, i));
  }
  for (int i : {1, 4, 6}) KILN_RETURN_IF_ERROR(CheckScale(n, in[i]));
  Node* a_zp = in[2];
  Node* b_zp = in[5];
  KILN_ASSIGN_OR_RETURN(Node* acc, IntegerProduct(c, n, in[0], a_zp, in[3], b_zp));
  KILN_ASSIGN_OR_RETURN(acc, c.Add(n, "cast", {acc}, CastAttrs{DType::kFloat32}, "/acc"));
  KILN_ASSIGN_OR_RETURN(Node* ab, c.Add(n, "mul", {in[1], in[4]}, NoAttrs{}, "/ab_scale"));
  if (ab->type.rank() == 1 && ab->type.NumElements() > 1) {  // per output column
    KILN_ASSIGN_OR_RETURN(ab, c.Add(n, "reshape", {ab}, ReshapeAttrs{{ab->type.shape[0]}},
                                    "/ab_columns"));
  }
  KILN_ASSIGN_OR_RETURN(Node* real, c.Add(n, "mul", {acc, ab}, NoAttrs{}, "/real"));
  KILN_ASSIGN_OR_RETURN(Node* y, Requantize(c, n, real, in[6], in[7], in[7]->type.dtype, ""));
  return c.Define(n.output(0), y);
}

// ConvInteger and QLinearConv: the centered operands convolved in float32
// (the fast conv kernels), exact while every output's sum of products stays
// below 2^24 in magnitude (uint8 x int8 products of up to 2^15: 512 terms
// at the extremes, far more in practice), then cast to int32 or requantised.
// The weight's zero point is per tensor or per output channel.
absl::StatusOr<Node*> CenteredWeight(Converter& c, const onnx::NodeProto& n, Node* w, Node* zp) {
  if (zp != nullptr && zp->type.NumElements() > 1) {
    KILN_ASSIGN_OR_RETURN(zp, AlongAxis(c, n, zp, 0, w->type.rank(), "/w_zp_channels"));
  }
  return Centered(c, n, w, zp, DType::kFloat32, "/w");
}

absl::Status ConvertConvInteger(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* w, c.Value(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* x_zp, OptionalValue(c, n, 2));
  KILN_ASSIGN_OR_RETURN(Node* w_zp, OptionalValue(c, n, 3));
  KILN_ASSIGN_OR_RETURN(Node* cx, Centered(c, n, x, x_zp, DType::kFloat32, "/x"));
  KILN_ASSIGN_OR_RETURN(Node* cw, CenteredWeight(c, n, w, w_zp));
  KILN_ASSIGN_OR_RETURN(Node* acc, Conv2D(c, n, cx, cw, nullptr));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "cast", {acc}, CastAttrs{DType::kInt32}));
  return c.Define(n.output(0), y);
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias?):
// bias is int32 in x_scale * w_scale units, added before requantising.
absl::Status ConvertQLinearConv(Converter& c, const onnx::NodeProto& n) {
  std::vector<Node*> in(8);
  for (int i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], c.Value(n, i));
  }
  for (int i : {1, 4, 6}) KILN_RETURN_IF_ERROR(CheckScale(n, in[i]));
  KILN_ASSIGN_OR_RETURN(Node* cx, Centered(c, n, in[0], in[2], DType::kFloat32, "/x"));
  KILN_ASSIGN_OR_RETURN(Node* cw, CenteredWeight(c, n, in[3], in[5]));
  Node* bias = nullptr;
  if (c.HasInput(n, 8)) {
    KILN_ASSIGN_OR_RETURN(Node* b, c.Value(n, 8));
    KILN_ASSIGN_OR_RETURN(bias, c.Add(n, "cast", {b}, CastAttrs{DType::kFloat32}, "/bias"));
  }
  KILN_ASSIGN_OR_RETURN(Node* acc, Conv2D(c, n, cx, cw, bias));
  KILN_ASSIGN_OR_RETURN(Node* xw, c.Add(n, "mul", {in[1], in[4]}, NoAttrs{}, "/xw_scale"));
  KILN_ASSIGN_OR_RETURN(xw, AlongAxis(c, n, xw, 1, acc->type.rank(), "/xw_channels"));
  KILN_ASSIGN_OR_RETURN(Node* real, c.Add(n, "mul", {acc, xw}, NoAttrs{}, "/real"));
  KILN_ASSIGN_OR_RETURN(Node* y, Requantize(c, n, real, in[6], in[7], in[7]->type.dtype, ""));
  return c.Define(n.output(0), y);
}

}  // namespace

void AddQuantizedConverters(ConverterMap& table) {
  table["DequantizeLinear"] = ConvertDequantizeLinear;
  table["QuantizeLinear"] = ConvertQuantizeLinear;
  table["DynamicQuantizeLinear"] = ConvertDynamicQuantizeLinear;
  table["MatMulInteger"] = ConvertMatMulInteger;
  table["QLinearMatMul"] = ConvertQLinearMatMul;
  table["ConvInteger"] = ConvertConvInteger;
  table["QLinearConv"] = ConvertQLinearConv;
}

}  // namespace kiln::onnx_import
