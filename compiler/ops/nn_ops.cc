// Neural-network ops: dense / matmul (with optional bias), softmax, conv2d.
#include <cmath>
#include <limits>
#include <tuple>

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
using te::ReduceOp;

// dense: x (..., K), weight (N, K) as in TVM, optional bias (N) -> (..., N).
// matmul: x (..., K), weight (K, N), optional bias (N) -> (..., N).
// Any one numeric type: float32 takes the packed-panel kernels; integer
// products (MatMulInteger) and float64 take the plain loop nest, exact in
// their compute type.
absl::StatusOr<TensorType> LinearRelation(const std::vector<TensorType>& in, bool transposed) {
  KILN_RETURN_IF_ERROR(RequireDType(in, in[0].dtype));
  if (in[0].dtype == DType::kBool) return absl::InvalidArgumentError("bool matrix products");
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (!transposed && w.rank() > 2 && x.rank() >= 2 && in.size() == 2) {
    // Batched matmul: (..., M, K) x (..., K, N) with NumPy broadcasting of the batch dims.
    if (x.shape.back() != w.shape[w.rank() - 2]) {
      return absl::InvalidArgumentError(absl::StrCat("matmul reduction dims differ: ",
                                                     x.ToString(), " x ", w.ToString()));
    }
    KILN_ASSIGN_OR_RETURN(
        std::vector<int64_t> batch,
        BroadcastShapes(std::vector<int64_t>(x.shape.begin(), x.shape.end() - 2),
                        std::vector<int64_t>(w.shape.begin(), w.shape.end() - 2)));
    batch.push_back(x.shape[x.rank() - 2]);
    batch.push_back(w.shape.back());
    return TensorType{x.dtype, batch};
  }
  if (x.rank() < 1 || w.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("expected x of rank >= 1 and a 2-D weight, got ",
                                                   x.ToString(), " and ", w.ToString()));
  }
  const int64_t k = x.shape.back();
  const int64_t wk = transposed ? w.shape[1] : w.shape[0];
  const int64_t n = transposed ? w.shape[0] : w.shape[1];
  if (k != wk) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduction dims differ: x ", x.ToString(), " has K=", k, " but weight ", w.ToString(),
        " has K=", wk));
  }
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != n)) {
    return absl::InvalidArgumentError(absl::StrCat("bias ", in[2].ToString(),
                                                   " must have shape [", n, "]"));
  }
  std::vector<int64_t> shape = x.shape;
  shape.back() = n;
  return TensorType{x.dtype, shape};
}

Expr LinearCompute(ComputeContext& ctx, bool transposed) {
  te::ExprBuilder& b = ctx.b();
  if (!transposed && ctx.input_type(1).rank() > 2) {
    // Batched: each operand reads the output's batch indices, right-aligned,
    // size-1 batch dims at 0.
    const std::vector<Expr>& o = ctx.out();
    const size_t out_rank = o.size();
    te::Var k = ctx.ReduceVar("k", ctx.input_type(0).shape.back());
    auto operand = [&](int which, Expr row, Expr col) {
      const std::vector<int64_t>& s = ctx.input_type(which).shape;
      std::vector<Expr> idx;
      const size_t batch = s.size() - 2;
      for (size_t d = 0; d < batch; ++d) {
        idx.push_back(s[d] == 1 ? b.Int(0) : o[out_rank - 2 - batch + d]);
      }
      idx.push_back(row);
      idx.push_back(col);
      return ctx.Input(which, idx);
    };
    Expr a = operand(0, o[out_rank - 2], b.Ref(k));
    Expr w = operand(1, b.Ref(k), o[out_rank - 1]);
    return b.Reduce(ReduceOp::kSum, {k}, b.Mul(a, w));
  }
  const int64_t k_extent = ctx.input_type(0).shape.back();
  te::Var k = ctx.ReduceVar("k", k_extent);
  std::vector<Expr> x_idx = ctx.out();
  x_idx.back() = b.Ref(k);
  Expr j = ctx.out().back();
  Expr w = transposed ? ctx.Input(1, {j, b.Ref(k)}) : ctx.Input(1, {b.Ref(k), j});
  Expr sum = b.Reduce(ReduceOp::kSum, {k}, b.Mul(ctx.Input(0, x_idx), w));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {j}));
  return sum;
}

// 2*M*N*K: one multiply-add per output element and step of K (x's last dim
// in every form), plus one add per output element for a bias.
double LinearFlops(const std::vector<TensorType>& in, const TensorType& out, const Attrs&) {
  const double outputs = static_cast<double>(out.NumElements());
  return 2 * outputs * static_cast<double>(in[0].shape.back()) + (in.size() == 3 ? outputs : 0);
}

void RegisterLinear(OpRegistry& r, const char* name, bool transposed, const char* summary) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = [transposed](const std::vector<TensorType>& in, const Attrs&) {
    return LinearRelation(in, transposed);
  };
  def.compute = [transposed](ComputeContext& ctx) { return LinearCompute(ctx, transposed); };
  def.flops = LinearFlops;
  r.Register(std::move(def));
}

void RegisterSoftmax(OpRegistry& r, bool log) {
  OpDef def;
  def.name = log ? "log_softmax" : "softmax";
  // As in recent TVM: its elementwise consumers may fuse into it.
  def.pattern = OpPattern::kOutEWiseFusable;
  def.summary = "exp(x - max) / sum(exp(x - max)) along attribute `axis` (default -1)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis"}));
    KILN_ASSIGN_OR_RETURN(int64_t axis, GetIntAttr(raw, "axis", -1));
    return Attrs(AxisAttrs{axis});
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireFloat(in));
    KILN_RETURN_IF_ERROR(NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank()).status());
    return in[0];
  };
  def.compute = [log](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const int64_t rank = ctx.input_type(0).rank();
    int64_t axis = ctx.attrs<AxisAttrs>().axis;
    if (axis < 0) axis += rank;
    const int64_t extent = ctx.input_type(0).shape[axis];
    auto along = [&](const te::Var& v) {
      std::vector<Expr> idx = ctx.out();
      idx[axis] = b.Ref(v);
      return ctx.Input(0, idx);
    };
    te::Var m = ctx.ReduceVar("m", extent);
    Expr max = b.Reduce(ReduceOp::kMax, {m}, along(m));
    te::Var s = ctx.ReduceVar("s", extent);
    Expr sum = b.Reduce(ReduceOp::kSum, {s}, b.Unary(te::UnaryOp::kExp, b.Sub(along(s), max)));
    Expr x = ctx.Input(0, ctx.out());
    if (log) return b.Sub(b.Sub(x, max), b.Unary(te::UnaryOp::kLog, sum));
    return b.Div(b.Unary(te::UnaryOp::kExp, b.Sub(x, max)), sum);
  };
  r.Register(std::move(def));
}

// conv2d: data (N, C, H, W), weight (O, C/groups, KH, KW), optional bias (O).
absl::StatusOr<TensorType> Conv2DRelation(const std::vector<TensorType>& in,
                                          const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(RequireDType(in, DType::kFloat32));
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(attrs);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 4 || w.rank() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d wants 4-D data and weight, got ",
                                                   x.ToString(), " and ", w.ToString()));
  }
  if (x.shape[1] % a.groups != 0 || w.shape[0] % a.groups != 0 ||
      w.shape[1] != x.shape[1] / a.groups) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d channels: data ", x.ToString(),
                                                   ", weight ", w.ToString(), ", groups ",
                                                   a.groups));
  }
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != w.shape[0])) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d bias ", in[2].ToString(),
                                                   " must have shape [", w.shape[0], "]"));
  }
  std::vector<int64_t> out{x.shape[0], w.shape[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    KILN_ASSIGN_OR_RETURN(out[2 + d],
                          ConvOutputExtent("conv2d", x.shape[2 + d], a.padding[d], a.padding[d + 2],
                                           w.shape[2 + d], a.dilation[d], a.strides[d]));
  }
  return TensorType{DType::kFloat32, out};
}

Expr Conv2DCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const Conv2DAttrs& a = ctx.attrs<Conv2DAttrs>();
  const std::vector<int64_t>& xs = ctx.input_type(0).shape;
  const std::vector<int64_t>& ws = ctx.input_type(1).shape;
  const int64_t cin_per_group = ws[1];
  const int64_t cout_per_group = ws[0] / a.groups;
  te::Var c = ctx.ReduceVar("rc", cin_per_group);
  te::Var ky = ctx.ReduceVar("ry", ws[2]);
  te::Var kx = ctx.ReduceVar("rx", ws[3]);
  const std::vector<Expr>& o = ctx.out();
  Expr channel = b.Add(b.Mul(b.Div(o[1], b.Int(cout_per_group)), b.Int(cin_per_group)), b.Ref(c));
  Expr y = b.Sub(b.Add(b.Mul(o[2], b.Int(a.strides[0])), b.Mul(b.Ref(ky), b.Int(a.dilation[0]))),
                 b.Int(a.padding[0]));
  Expr x = b.Sub(b.Add(b.Mul(o[3], b.Int(a.strides[1])), b.Mul(b.Ref(kx), b.Int(a.dilation[1]))),
                 b.Int(a.padding[1]));
  const bool padded = a.padding[0] || a.padding[1] || a.padding[2] || a.padding[3];
  Expr data;
  if (padded) {
    // Loads are evaluated eagerly, so clamp the index and select zero outside.
    Expr cond = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
    data = b.Select(cond,
                    ctx.Input(0, {o[0], channel, b.ClampIndex(y, xs[2]), b.ClampIndex(x, xs[3])}),
                    b.Float(0));
  } else {
    data = ctx.Input(0, {o[0], channel, y, x});
  }
  Expr weight = ctx.Input(1, {o[1], b.Ref(c), b.Ref(ky), b.Ref(kx)});
  Expr sum = b.Reduce(ReduceOp::kSum, {c, ky, kx}, b.Mul(data, weight));
  if (ctx.num_inputs() == 3) sum = b.Add(sum, ctx.Input(2, {o[1]}));
  return sum;
}

// 2*N*OC*OH*OW * IC/groups*KH*KW: the OIHW weight's last three dims are
// exactly the window one output element reduces over. A bias adds one per output.
double Conv2DFlops(const std::vector<TensorType>& in, const TensorType& out, const Attrs&) {
  const std::vector<int64_t>& w = in[1].shape;
  const double outputs = static_cast<double>(out.NumElements());
  return 2 * outputs * static_cast<double>(w[1] * w[2] * w[3]) + (in.size() == 3 ? outputs : 0);
}

void RegisterConv2D(OpRegistry& r) {
  OpDef def;
  def.name = "conv2d";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.summary = "2-D convolution, NCHW data, OIHW weight, optional bias";
  def.parse_attrs = ParseConv2DAttrs;
  def.infer_type = Conv2DRelation;
  def.compute = Conv2DCompute;
  def.flops = Conv2DFlops;
  r.Register(std::move(def));
}

// batch_norm (inference): x, gamma, beta, mean, var; per-channel along `axis`.
void RegisterBatchNorm(OpRegistry& r) {
  OpDef def;
  def.name = "batch_norm";
  def.pattern = OpPattern::kBroadcast;
  def.min_inputs = def.max_inputs = 5;
  def.summary = "inference batch norm: (x - mean) / sqrt(var + epsilon) * gamma + beta";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis", "epsilon"}));
    BatchNormAttrs a;
    KILN_ASSIGN_OR_RETURN(a.axis, GetIntAttr(raw, "axis", 1));
    KILN_ASSIGN_OR_RETURN(a.epsilon, GetFloatAttr(raw, "epsilon", 1e-5f));
    if (!(a.epsilon >= 0)) return absl::InvalidArgumentError("epsilon must be >= 0");
    return Attrs(a);
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireFloat(in));
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(std::get<BatchNormAttrs>(attrs).axis, in[0].rank()));
    const int64_t channels = in[0].shape[axis];
    for (int i = 1; i < 5; ++i) {
      if (in[i].shape != std::vector<int64_t>{channels}) {
        return absl::InvalidArgumentError(absl::StrCat(
            "batch_norm parameter ", i, " is ", in[i].ToString(), ", expected [", channels, "]"));
      }
    }
    return in[0];
  };
  def.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    int64_t axis = ctx.attrs<BatchNormAttrs>().axis;
    if (axis < 0) axis += ctx.input_type(0).rank();
    Expr c = ctx.out()[axis];
    Expr norm = b.Div(b.Sub(ctx.Input(0, ctx.out()), ctx.Input(3, {c})),
                      b.Unary(te::UnaryOp::kSqrt,
                              b.Add(ctx.Input(4, {c}), b.Float(ctx.attrs<BatchNormAttrs>().epsilon))));
    return b.Add(b.Mul(norm, ctx.Input(1, {c})), ctx.Input(2, {c}));
  };
  r.Register(std::move(def));
}

void RegisterDropout(OpRegistry& r) {
  OpDef def;
  def.name = "dropout";
  def.pattern = OpPattern::kElemWise;
  def.summary = "identity at inference (attribute `rate` is the training drop rate)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"rate"}));
    KILN_ASSIGN_OR_RETURN(float rate, GetFloatAttr(raw, "rate", 0.5f));
    return Attrs(DropoutAttrs{rate});
  };
  def.infer_type = [](const std::vector<TensorType>& in, const Attrs&) {
    return absl::StatusOr<TensorType>(in[0]);
  };
  def.compute = [](ComputeContext& ctx) { return ctx.Input(0, ctx.out()); };
  r.Register(std::move(def));
}

absl::StatusOr<Attrs> ParsePool(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"kernel", "strides", "padding", "dilation",
                                             "ceil_mode", "count_include_pad",
                                             "column_major_indices"}));
  Pool2DAttrs a;
  KILN_ASSIGN_OR_RETURN(a.kernel, GetIntsAttr(raw, "kernel", {}));
  KILN_ASSIGN_OR_RETURN(a.strides, GetIntsAttr(raw, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.padding, GetIntsAttr(raw, "padding", {0, 0, 0, 0}));
  KILN_ASSIGN_OR_RETURN(a.dilation, GetIntsAttr(raw, "dilation", {1, 1}));
  KILN_ASSIGN_OR_RETURN(int64_t ceil, GetIntAttr(raw, "ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t include, GetIntAttr(raw, "count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(int64_t column_major, GetIntAttr(raw, "column_major_indices", 0));
  a.ceil_mode = ceil != 0;
  a.count_include_pad = include != 0;
  a.column_major_indices = column_major != 0;
  if (a.kernel.size() != 2 || a.strides.size() != 2 || a.dilation.size() != 2 ||
      a.padding.size() != 4) {
    return absl::InvalidArgumentError("pool2d wants kernel[2], strides[2], dilation[2], padding[4]");
  }
  for (int64_t v : a.kernel) {
    if (v < 1) return absl::InvalidArgumentError("pool kernel must be >= 1");
  }
  for (int64_t v : a.strides) {
    if (v < 1) return absl::InvalidArgumentError("pool strides must be >= 1");
  }
  for (int64_t v : a.dilation) {
    if (v < 1) return absl::InvalidArgumentError("pool dilation must be >= 1");
  }
  for (int64_t v : a.padding) {
    if (v < 0) return absl::InvalidArgumentError("pool padding must be >= 0");
  }
  return Attrs(a);
}

// Max pooling takes any numeric type (uint8 images); average pooling floats.
// max_pool2d and avg_pool2d (not max_pool2d_indices) also take NCHW{c}c:
// the trailing channel block rides along (ConvertLayoutNchwc keeps pools
// blocked).
absl::StatusOr<TensorType> PoolRelation(const std::vector<TensorType>& in, const Attrs& attrs,
                                        bool average, bool takes_blocked = false) {
  if (average) KILN_RETURN_IF_ERROR(RequireFloat(in));
  if (in[0].dtype == DType::kBool) {
    return absl::InvalidArgumentError("max pooling of bool tensors is not supported");
  }
  const Pool2DAttrs& a = std::get<Pool2DAttrs>(attrs);
  if (in[0].rank() != 4 && !(in[0].rank() == 5 && takes_blocked)) {
    return absl::InvalidArgumentError(absl::StrCat("pool2d wants NCHW, got ", in[0].ToString()));
  }
  std::vector<int64_t> out = in[0].shape;
  for (int d = 0; d < 2; ++d) {
    const int64_t padded = in[0].shape[2 + d] + a.padding[d] + a.padding[d + 2];
    const int64_t window = a.dilation[d] * (a.kernel[d] - 1) + 1;
    if (padded < window) return absl::InvalidArgumentError("pool window exceeds padded input");
    const int64_t span = padded - window;
    out[2 + d] = (a.ceil_mode ? (span + a.strides[d] - 1) / a.strides[d] : span / a.strides[d]) + 1;
    // A last window starting in the end padding is dropped (as ONNX and PyTorch do).
    if (a.ceil_mode && (out[2 + d] - 1) * a.strides[d] >= in[0].shape[2 + d] + a.padding[d]) {
      --out[2 + d];
    }
  }
  return TensorType{in[0].dtype, out};
}

// max_pool2d_indices: where each max_pool2d output came from, flattened
// over the whole input (N, C, H, W row-major, or with column_major_indices
// N, C, W, H, as ONNX's storage_order = 1), the first position among equal
// maxima; int64.
void RegisterPoolIndices(OpRegistry& r) {
  OpDef def;
  def.name = "max_pool2d_indices";
  def.pattern = OpPattern::kOpaque;
  def.summary = "the flattened input positions of max_pool2d's maxima (int64)";
  def.parse_attrs = ParsePool;
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_ASSIGN_OR_RETURN(TensorType t, PoolRelation(in, attrs, /*average=*/false));
    t.dtype = DType::kInt64;
    return t;
  };
  def.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const Pool2DAttrs& a = ctx.attrs<Pool2DAttrs>();
    const std::vector<int64_t>& xs = ctx.input_type(0).shape;
    const std::vector<Expr>& o = ctx.out();
    // The window at (ky, kx): its input coordinates, whether inside, the value.
    auto window = [&](const te::Var& ky, const te::Var& kx) {
      Expr y = b.Sub(b.Add(b.Mul(o[2], b.Int(a.strides[0])),
                           b.Mul(b.Ref(ky), b.Int(a.dilation[0]))),
                     b.Int(a.padding[0]));
      Expr x = b.Sub(b.Add(b.Mul(o[3], b.Int(a.strides[1])),
                           b.Mul(b.Ref(kx), b.Int(a.dilation[1]))),
                     b.Int(a.padding[1]));
      Expr valid = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
      Expr cy = b.ClampIndex(y, xs[2]), cx = b.ClampIndex(x, xs[3]);
      return std::make_tuple(valid, cy, cx, ctx.Input(0, {o[0], o[1], cy, cx}));
    };
    te::Var ky = ctx.ReduceVar("ky", a.kernel[0]), kx = ctx.ReduceVar("kx", a.kernel[1]);
    auto [valid, y, x, value] = window(ky, kx);
    Expr lowest = te::IsFloat(value->type) ? b.Constant(value->type, -INFINITY)
                                           : b.Int(std::numeric_limits<int64_t>::min());
    Expr best = b.Reduce(te::ReduceOp::kMax, {ky, kx}, b.Select(valid, value, lowest));
    te::Var ky2 = ctx.ReduceVar("ky2", a.kernel[0]), kx2 = ctx.ReduceVar("kx2", a.kernel[1]);
    auto [valid2, y2, x2, value2] = window(ky2, kx2);
    Expr plane = b.Add(b.Mul(o[0], b.Int(xs[1])), o[1]);
    Expr within = a.column_major_indices ? b.Add(b.Mul(x2, b.Int(xs[2])), y2)
                                         : b.Add(b.Mul(y2, b.Int(xs[3])), x2);
    Expr flat = b.Add(b.Mul(plane, b.Int(xs[2] * xs[3])), within);
    Expr hit = b.Binary(te::BinaryOp::kAnd, valid2, b.Compare(te::CompareOp::kEQ, value2, best));
    return b.Reduce(te::ReduceOp::kMin, {ky2, kx2},
                    b.Select(hit, flat, b.Int(std::numeric_limits<int64_t>::max())));
  };
  r.Register(std::move(def));
}

void RegisterPool(OpRegistry& r, const char* name, bool average) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kOutEWiseFusable;
  def.summary = average ? "2-D average pooling, NCHW" : "2-D max pooling, NCHW";
  def.parse_attrs = ParsePool;
  def.infer_type = [average](const std::vector<TensorType>& in, const Attrs& attrs) {
    return PoolRelation(in, attrs, average, /*takes_blocked=*/true);
  };
  // One compare or add per window element of each output.
  def.flops = [](const std::vector<TensorType>&, const TensorType& out, const Attrs& attrs) {
    const Pool2DAttrs& a = std::get<Pool2DAttrs>(attrs);
    return static_cast<double>(out.NumElements()) * static_cast<double>(a.kernel[0] * a.kernel[1]);
  };
  def.compute = [average](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const Pool2DAttrs& a = ctx.attrs<Pool2DAttrs>();
    const std::vector<int64_t>& xs = ctx.input_type(0).shape;
    te::Var ky = ctx.ReduceVar("ky", a.kernel[0]);
    te::Var kx = ctx.ReduceVar("kx", a.kernel[1]);
    const std::vector<Expr>& o = ctx.out();
    Expr y = b.Sub(b.Add(b.Mul(o[2], b.Int(a.strides[0])), b.Mul(b.Ref(ky), b.Int(a.dilation[0]))),
                   b.Int(a.padding[0]));
    Expr x = b.Sub(b.Add(b.Mul(o[3], b.Int(a.strides[1])), b.Mul(b.Ref(kx), b.Int(a.dilation[1]))),
                   b.Int(a.padding[1]));
    Expr valid = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
    std::vector<Expr> at{o[0], o[1], b.ClampIndex(y, xs[2]), b.ClampIndex(x, xs[3])};
    if (xs.size() == 5) at.push_back(o[4]);  // NCHW{c}c
    Expr value = ctx.Input(0, at);
    if (!average) {
      Expr lowest = te::IsFloat(value->type)
                        ? b.Constant(value->type, -INFINITY)
                        : b.Int(std::numeric_limits<int64_t>::min());
      return b.Reduce(te::ReduceOp::kMax, {ky, kx}, b.Select(valid, value, lowest));
    }
    Expr sum =
        b.Reduce(te::ReduceOp::kSum, {ky, kx}, b.Select(valid, value, b.Constant(value->type, 0)));
    if (a.count_include_pad) {
      // Divide by the window clipped to the padded input (not beyond it, for ceil_mode).
      auto span = [&](Expr start, int64_t n, int d) {
        Expr lo = b.Max(start, b.Int(-a.padding[d]));
        Expr hi = b.Min(b.Add(start, b.Int(a.dilation[d] * (a.kernel[d] - 1) + 1)),
                        b.Int(n + a.padding[d + 2]));
        return b.Div(b.Add(b.Sub(hi, lo), b.Int(a.dilation[d] - 1)), b.Int(a.dilation[d]));
      };
      Expr y0 = b.Sub(b.Mul(o[2], b.Int(a.strides[0])), b.Int(a.padding[0]));
      Expr x0 = b.Sub(b.Mul(o[3], b.Int(a.strides[1])), b.Int(a.padding[1]));
      Expr count = b.Mul(span(y0, xs[2], 0), span(x0, xs[3], 1));
      return b.Div(sum, b.Cast(value->type, count));
    }
    Expr count = b.Reduce(te::ReduceOp::kSum, {ky, kx},
                          b.Select(valid, b.Constant(value->type, 1), b.Constant(value->type, 0)));
    return b.Div(sum, count);
  };
  r.Register(std::move(def));
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  RegisterBatchNorm(r);
  RegisterDropout(r);
  RegisterLinear(r, "dense", /*transposed=*/true,
                 "x (..., K) times weight (N, K) transposed, plus optional bias (N)");
  RegisterLinear(r, "matmul", /*transposed=*/false,
                 "x (..., K) times weight (K, N), plus optional bias (N)");
  RegisterSoftmax(r, /*log=*/false);
  RegisterSoftmax(r, /*log=*/true);
  RegisterPool(r, "max_pool2d", /*average=*/false);
  RegisterPool(r, "avg_pool2d", /*average=*/true);
  RegisterPoolIndices(r);
  RegisterConv2D(r);
}

}  // namespace kiln
