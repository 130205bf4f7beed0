// Data-movement ops: reshape and transpose (injective index maps).
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
    idx[axis] = b.Max(b.Int(0), b.Min(b.Sub(pos, b.Int(offsets[i])), b.Int(len - 1)));
    Expr value = ctx.Input(i, idx);
    result = result == nullptr
                 ? value
                 : b.Select(b.Compare(te::CompareOp::kLT, pos, b.Int(offsets[i + 1])), value,
                            result);
  }
  return result ? result : b.Constant(ctx.out_scalar(), 0);  // every input empty
}

}  // namespace

void RegisterTransformOps(OpRegistry& r) {
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
