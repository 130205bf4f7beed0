// Data-movement ops: reshape and transpose (injective index maps).
#include <algorithm>
#include <numeric>

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

absl::StatusOr<TensorType> ReshapeRelation(const std::vector<TensorType>& in,
                                           const Attrs& attrs) {
  const std::vector<int64_t>& requested = std::get<ReshapeAttrs>(attrs).shape;
  const TensorType& x = in[0];
  std::vector<int64_t> shape(requested.size());
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t d = requested[i];
    if (d == 0) {
      if (i >= x.shape.size()) {
        return absl::InvalidArgumentError(absl::StrCat("reshape dim ", i, " copies a dim ",
                                                       "the input ", x.ToString(),
                                                       " does not have"));
      }
      d = x.shape[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return absl::InvalidArgumentError("reshape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("reshape dim ", d, " is invalid"));
    shape[i] = d;
    KILN_ASSIGN_OR_RETURN(known, CheckedNumElements({known, d}));
  }
  const int64_t total = x.NumElements();
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", x.ToString(), " to ",
                                                     ShapeToString(requested)));
    }
    shape[infer_at] = total / known;
  } else if (known != total) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", x.ToString(), " (",
                                                   total, " elements) to ",
                                                   ShapeToString(requested)));
  }
  return TensorType{x.dtype, shape};
}

// Row-major flat position of the output element, unflattened into the input's dims.
Expr ReshapeCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const std::vector<int64_t>& out_shape = ctx.output_type().shape;
  Expr flat = b.Int(0);
  for (size_t d = 0; d < out_shape.size(); ++d) {
    flat = b.Add(b.Mul(flat, b.Int(out_shape[d])), ctx.out()[d]);
  }
  const std::vector<int64_t>& in_shape = ctx.input_type(0).shape;
  std::vector<Expr> idx(in_shape.size());
  for (int d = static_cast<int>(in_shape.size()) - 1; d >= 0; --d) {
    idx[d] = d == 0 ? flat : b.Mod(flat, b.Int(in_shape[d]));
    flat = b.Div(flat, b.Int(in_shape[d]));
  }
  return ctx.Input(0, idx);
}

absl::StatusOr<TensorType> TransposeRelation(const std::vector<TensorType>& in,
                                             const Attrs& attrs) {
  std::vector<int64_t> perm = std::get<TransposeAttrs>(attrs).perm;
  const TensorType& x = in[0];
  if (perm.empty()) {
    perm.resize(x.rank());
    for (int64_t i = 0; i < x.rank(); ++i) perm[i] = x.rank() - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("transpose perm ", ShapeToString(perm),
                                                   " does not match ", x.ToString()));
  }
  std::vector<bool> seen(perm.size());
  std::vector<int64_t> shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= x.rank() || seen[perm[i]]) {
      return absl::InvalidArgumentError(absl::StrCat("transpose perm ", ShapeToString(perm),
                                                     " is not a permutation"));
    }
    seen[perm[i]] = true;
    shape[i] = x.shape[perm[i]];
  }
  return TensorType{x.dtype, shape};
}

Expr TransposeCompute(ComputeContext& ctx) {
  std::vector<int64_t> perm = ctx.attrs<TransposeAttrs>().perm;
  const int64_t rank = ctx.input_type(0).rank();
  if (perm.empty()) {
    perm.resize(rank);
    for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
  }
  std::vector<Expr> idx(rank);
  for (int64_t i = 0; i < rank; ++i) idx[perm[i]] = ctx.out()[i];
  return ctx.Input(0, idx);
}

absl::StatusOr<TensorType> ConcatRelation(const std::vector<TensorType>& in,
                                          const Attrs& attrs) {
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank()));
  TensorType out = in[0];
  out.shape[axis] = 0;
  for (const TensorType& t : in) {
    if (t.dtype != in[0].dtype || t.rank() != in[0].rank()) {
      return absl::InvalidArgumentError("concat inputs differ in dtype or rank");
    }
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (d != axis && t.shape[d] != in[0].shape[d]) {
        return absl::InvalidArgumentError(absl::StrCat("concat inputs differ in dim ", d, ": ",
                                                       in[0].ToString(), " vs ", t.ToString()));
      }
    }
    out.shape[axis] += t.shape[axis];
  }
  return out;
}

// Each input read at (index - its offset) along the axis, chosen by range;
// indices are clamped because every branch's load is evaluated.
Expr ConcatCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  int64_t axis = ctx.attrs<AxisAttrs>().axis;
  if (axis < 0) axis += ctx.output_type().rank();
  const Expr pos = ctx.out()[axis];
  std::vector<int64_t> offsets{0};
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    offsets.push_back(offsets.back() + ctx.input_type(i).shape[axis]);
  }
  Expr result;
  for (int i = ctx.num_inputs() - 1; i >= 0; --i) {
    const int64_t len = ctx.input_type(i).shape[axis];
    if (len == 0) continue;
    std::vector<Expr> idx = ctx.out();
    idx[axis] = b.ClampIndex(b.Sub(pos, b.Int(offsets[i])), len);
    Expr value = ctx.Input(i, idx);
    result = result == nullptr
                 ? value
                 : b.Select(b.Compare(te::CompareOp::kLT, pos, b.Int(offsets[i + 1])), value,
                            result);
  }
  return result ? result : b.Constant(ctx.out_scalar(), 0);  // every input empty
}

void RegisterSliceGatherExpandPad(OpRegistry& r) {
  OpDef slice;
  slice.name = "slice";
  slice.pattern = OpPattern::kInjective;
  slice.summary = "strided window: starts, steps and sizes per dim";
  slice.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"starts", "steps", "sizes"}));
    SliceAttrs a;
    KILN_ASSIGN_OR_RETURN(a.starts, GetIntsAttr(raw, "starts", {}));
    KILN_ASSIGN_OR_RETURN(a.steps, GetIntsAttr(raw, "steps", {}));
    KILN_ASSIGN_OR_RETURN(a.sizes, GetIntsAttr(raw, "sizes", {}));
    return Attrs(a);
  };
  slice.infer_type = [](const std::vector<TensorType>& in,
                        const Attrs& attrs) -> absl::StatusOr<TensorType> {
    const SliceAttrs& a = std::get<SliceAttrs>(attrs);
    const TensorType& x = in[0];
    if (static_cast<int64_t>(a.starts.size()) != x.rank() || a.steps.size() != a.starts.size() ||
        a.sizes.size() != a.starts.size()) {
      return absl::InvalidArgumentError("slice wants one start, step and size per dim");
    }
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (a.sizes[d] < 0 || a.steps[d] == 0) return absl::InvalidArgumentError("bad slice");
      if (a.sizes[d] == 0) continue;
      const int64_t last = a.starts[d] + (a.sizes[d] - 1) * a.steps[d];
      if (a.starts[d] < 0 || a.starts[d] >= x.shape[d] || last < 0 || last >= x.shape[d]) {
        return absl::InvalidArgumentError(absl::StrCat("slice leaves dim ", d, " of ",
                                                       x.ToString()));
      }
    }
    return TensorType{x.dtype, a.sizes};
  };
  slice.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const SliceAttrs& a = ctx.attrs<SliceAttrs>();
    std::vector<Expr> idx;
    for (size_t d = 0; d < a.starts.size(); ++d) {
      idx.push_back(b.Add(b.Int(a.starts[d]), b.Mul(ctx.out()[d], b.Int(a.steps[d]))));
    }
    return ctx.Input(0, idx);
  };
  r.Register(std::move(slice));

  OpDef gather;
  gather.name = "gather";
  gather.pattern = OpPattern::kInjective;
  gather.min_inputs = gather.max_inputs = 2;
  gather.summary =
      "data indexed along `axis` by an int32/int64 tensor (negative counts from the end)";
  gather.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis"}));
    KILN_ASSIGN_OR_RETURN(int64_t axis, GetIntAttr(raw, "axis", 0));
    return Attrs(AxisAttrs{axis});
  };
  gather.infer_type = [](const std::vector<TensorType>& in,
                         const Attrs& attrs) -> absl::StatusOr<TensorType> {
    if (in[1].dtype != DType::kInt64 && in[1].dtype != DType::kInt32) {
      return absl::InvalidArgumentError("gather indices: int32 or int64");
    }
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank()));
    std::vector<int64_t> shape(in[0].shape.begin(), in[0].shape.begin() + axis);
    shape.insert(shape.end(), in[1].shape.begin(), in[1].shape.end());
    shape.insert(shape.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
    return TensorType{in[0].dtype, shape};
  };
  gather.index_operand = [](const std::vector<TensorType>& in,
                           const Attrs& attrs) -> std::optional<IndexOperand> {
    absl::StatusOr<int64_t> axis = NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank());
    if (!axis.ok()) return std::nullopt;
    return IndexOperand{1, in[0].shape[*axis]};
  };
  gather.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    int64_t axis = ctx.attrs<AxisAttrs>().axis;
    if (axis < 0) axis += ctx.input_type(0).rank();
    const int64_t index_rank = ctx.input_type(1).rank();
    const int64_t n = ctx.input_type(0).shape[axis];
    std::vector<Expr> index_idx(ctx.out().begin() + axis, ctx.out().begin() + axis + index_rank);
    Expr i = ctx.Input(1, index_idx);
    i = b.Select(b.Compare(te::CompareOp::kLT, i, b.Int(0)), b.Add(i, b.Int(n)), i);
    i = b.ClampIndex(i, n);  // out-of-range indices never read outside
    std::vector<Expr> idx(ctx.out().begin(), ctx.out().begin() + axis);
    idx.push_back(i);
    idx.insert(idx.end(), ctx.out().begin() + axis + index_rank, ctx.out().end());
    return ctx.Input(0, idx);
  };
  r.Register(std::move(gather));

  // gather_elements: out[i] = data[i with its `axis` index replaced by
  // indices[i]]; the output takes the indices' shape (ONNX GatherElements).
  OpDef elements;
  elements.name = "gather_elements";
  elements.pattern = OpPattern::kInjective;
  elements.min_inputs = elements.max_inputs = 2;
  elements.summary = "data indexed elementwise along `axis` by an int64 tensor of its rank";
  elements.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis"}));
    KILN_ASSIGN_OR_RETURN(int64_t axis, GetIntAttr(raw, "axis", 0));
    return Attrs(AxisAttrs{axis});
  };
  elements.infer_type = [](const std::vector<TensorType>& in,
                           const Attrs& attrs) -> absl::StatusOr<TensorType> {
    if (in[1].dtype != DType::kInt64 && in[1].dtype != DType::kInt32) {
      return absl::InvalidArgumentError("gather_elements indices: int32 or int64");
    }
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank()));
    if (in[1].rank() != in[0].rank()) {
      return absl::InvalidArgumentError("gather_elements: indices must have the data's rank");
    }
    for (int64_t d = 0; d < in[0].rank(); ++d) {
      if (d != axis && in[1].shape[d] > in[0].shape[d]) {
        return absl::InvalidArgumentError("gather_elements: indices larger than the data");
      }
    }
    return TensorType{in[0].dtype, in[1].shape};
  };
  elements.index_operand = [](const std::vector<TensorType>& in,
                              const Attrs& attrs) -> std::optional<IndexOperand> {
    absl::StatusOr<int64_t> axis = NormalizeAxis(std::get<AxisAttrs>(attrs).axis, in[0].rank());
    if (!axis.ok()) return std::nullopt;
    return IndexOperand{1, in[0].shape[*axis]};
  };
  elements.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    int64_t axis = ctx.attrs<AxisAttrs>().axis;
    if (axis < 0) axis += ctx.input_type(0).rank();
    const int64_t n = ctx.input_type(0).shape[axis];
    Expr i = ctx.Input(1, ctx.out());
    i = b.Select(b.Compare(te::CompareOp::kLT, i, b.Int(0)), b.Add(i, b.Int(n)), i);
    std::vector<Expr> idx = ctx.out();
    idx[axis] = b.ClampIndex(i, n);  // out-of-range indices never read outside
    return ctx.Input(0, idx);
  };
  r.Register(std::move(elements));

  OpDef expand;
  expand.name = "expand";
  expand.pattern = OpPattern::kBroadcast;
  expand.summary = "broadcast to attribute `shape` (NumPy rules, both ways)";
  expand.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"shape"}));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntsAttr(raw, "shape", {}));
    return Attrs(ReshapeAttrs{shape});
  };
  expand.infer_type = [](const std::vector<TensorType>& in,
                         const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                          BroadcastShapes(in[0].shape, std::get<ReshapeAttrs>(attrs).shape));
    return TensorType{in[0].dtype, shape};
  };
  expand.compute = [](ComputeContext& ctx) { return ctx.BroadcastInput(0); };
  r.Register(std::move(expand));

  OpDef pad;
  pad.name = "pad";
  pad.pattern = OpPattern::kInjective;
  pad.summary =
      "padding by `pads` (begins, then ends): mode constant (`value`, or a scalar second "
      "input), edge or reflect";
  pad.min_inputs = 1;
  pad.max_inputs = 2;
  pad.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"pads", "value", "mode"}));
    PadAttrs a;
    KILN_ASSIGN_OR_RETURN(a.pads, GetIntsAttr(raw, "pads", {}));
    KILN_ASSIGN_OR_RETURN(a.value, GetFloatAttr(raw, "value", 0));
    auto it = raw.find("mode");
    const std::string* mode = it == raw.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (mode != nullptr) {
      std::optional<PadAttrs::Mode> named = PadModeNamed(*mode);
      if (!named) return absl::InvalidArgumentError(absl::StrCat("pad mode '", *mode, "'"));
      a.mode = *named;
    }
    return Attrs(a);
  };
  pad.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    const PadAttrs& a = std::get<PadAttrs>(attrs);
    const int64_t rank = in[0].rank();
    if (static_cast<int64_t>(a.pads.size()) != 2 * rank) {
      return absl::InvalidArgumentError("pad wants 2 * rank pads");
    }
    if (in.size() == 2 && (in[1].NumElements() != 1 || in[1].dtype != in[0].dtype)) {
      return absl::InvalidArgumentError("a pad value input must be one element of the data's type");
    }
    std::vector<int64_t> shape = in[0].shape;
    for (int64_t d = 0; d < rank; ++d) {
      shape[d] += a.pads[d] + a.pads[d + rank];
      if (shape[d] < 0) return absl::InvalidArgumentError("pad removes more than the dim");
      const int64_t most = std::max(a.pads[d], a.pads[d + rank]);
      if (a.mode == PadAttrs::Mode::kReflect && most > 0 && most >= in[0].shape[d]) {
        return absl::InvalidArgumentError(absl::StrCat("reflect pads of ", most,
                                                       " need a dim above that, got ",
                                                       in[0].shape[d]));
      }
    }
    return TensorType{in[0].dtype, shape};
  };
  pad.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const PadAttrs& a = ctx.attrs<PadAttrs>();
    const std::vector<int64_t>& in = ctx.input_type(0).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    Expr valid = b.Bool(true);
    std::vector<Expr> idx;
    for (int64_t d = 0; d < rank; ++d) {
      Expr i = b.Sub(ctx.out()[d], b.Int(a.pads[d]));
      if (a.mode == PadAttrs::Mode::kReflect && in[d] > 1) {
        // Mirror about the first and the last element: -i below, 2 (n - 1) - i above.
        i = b.Select(b.Compare(te::CompareOp::kLT, i, b.Int(0)), b.Sub(b.Int(0), i), i);
        i = b.Select(b.Compare(te::CompareOp::kGE, i, b.Int(in[d])),
                     b.Sub(b.Int(2 * (in[d] - 1)), i), i);
      } else if (a.mode == PadAttrs::Mode::kConstant) {
        valid = b.Binary(te::BinaryOp::kAnd, valid, b.InRange(i, in[d]));
      }
      idx.push_back(b.ClampIndex(i, std::max<int64_t>(in[d], 1)));
    }
    Expr x = ctx.Input(0, idx);
    if (a.mode != PadAttrs::Mode::kConstant) return x;
    Expr fill = ctx.num_inputs() == 2
                    ? ctx.Input(1, std::vector<Expr>(ctx.input_type(1).rank(), b.Int(0)))
                    : b.Constant(ctx.out_scalar(), a.value);
    return b.Select(valid, x, fill);
  };
  r.Register(std::move(pad));
}

}  // namespace

void RegisterTransformOps(OpRegistry& r) {
  RegisterSliceGatherExpandPad(r);
  OpDef concat;
  concat.name = "concat";
  concat.pattern = OpPattern::kInjective;
  concat.min_inputs = 1;
  concat.max_inputs = 256;
  concat.summary = "joins inputs along attribute `axis`";
  concat.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis"}));
    KILN_ASSIGN_OR_RETURN(int64_t axis, GetIntAttr(raw, "axis", 0));
    return Attrs(AxisAttrs{axis});
  };
  concat.infer_type = ConcatRelation;
  concat.compute = ConcatCompute;
  r.Register(std::move(concat));

  OpDef reshape;
  reshape.name = "reshape";
  reshape.pattern = OpPattern::kInjective;
  reshape.summary = "same elements, new shape (attribute `shape`; -1 infers, 0 copies)";
  reshape.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"shape"}));
    if (!HasAttr(raw, "shape")) return absl::InvalidArgumentError("reshape needs `shape`");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntsAttr(raw, "shape", {}));
    return Attrs(ReshapeAttrs{shape});
  };
  reshape.infer_type = ReshapeRelation;
  reshape.compute = ReshapeCompute;
  r.Register(std::move(reshape));

  OpDef transpose;
  transpose.name = "transpose";
  transpose.pattern = OpPattern::kInjective;
  transpose.summary = "permutes dims (attribute `perm`; empty reverses)";
  transpose.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"perm"}));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, GetIntsAttr(raw, "perm", {}));
    return Attrs(TransposeAttrs{perm});
  };
  transpose.infer_type = TransposeRelation;
  transpose.compute = TransposeCompute;
  r.Register(std::move(transpose));
}

}  // namespace kiln
