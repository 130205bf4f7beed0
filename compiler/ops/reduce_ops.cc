// Reductions over a set of axes: sum, max.
#include <algorithm>

#include "absl/status/status.h"
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

// The reduced axes, non-negative and sorted; every axis when none are given.
absl::StatusOr<std::vector<int64_t>> ReducedAxes(const ReduceAttrs& a, int64_t rank) {
  std::vector<int64_t> axes;
  if (a.axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t axis : a.axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(axis, rank));
    if (std::find(axes.begin(), axes.end(), n) != axes.end()) {
      return absl::InvalidArgumentError("reduction axes repeat");
    }
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

void RegisterReduce(OpRegistry& r, const char* name, te::ReduceOp op, const char* summary,
                    bool mean = false) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kCommReduce;
  def.summary = summary;
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axes", "keepdims"}));
    ReduceAttrs a;
    KILN_ASSIGN_OR_RETURN(a.axes, GetIntsAttr(raw, "axes", {}));
    KILN_ASSIGN_OR_RETURN(int64_t keep, GetIntAttr(raw, "keepdims", 0));
    a.keepdims = keep != 0;
    return Attrs(a);
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    if (in[0].dtype == DType::kBool) return absl::InvalidArgumentError("cannot reduce bool");
    const ReduceAttrs& a = std::get<ReduceAttrs>(attrs);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReducedAxes(a, in[0].rank()));
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < in[0].rank(); ++d) {
      bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced) {
        shape.push_back(in[0].shape[d]);
      } else if (a.keepdims) {
        shape.push_back(1);
      }
    }
    return TensorType{in[0].dtype, shape};
  };
  def.compute = [op, mean](ComputeContext& ctx) {
    const ReduceAttrs& a = ctx.attrs<ReduceAttrs>();
    const std::vector<int64_t>& in_shape = ctx.input_type(0).shape;
    std::vector<int64_t> axes = *ReducedAxes(a, static_cast<int64_t>(in_shape.size()));
    std::vector<te::Var> vars;
    std::vector<Expr> idx;
    size_t out_dim = 0;
    for (size_t d = 0; d < in_shape.size(); ++d) {
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end()) {
        vars.push_back(ctx.ReduceVar("r" + std::to_string(d), in_shape[d]));
        idx.push_back(ctx.b().Ref(vars.back()));
        if (a.keepdims) ++out_dim;
      } else {
        idx.push_back(ctx.out()[out_dim++]);
      }
    }
    Expr reduced = ctx.b().Reduce(op, vars, ctx.Input(0, idx));
    if (!mean) return reduced;
    int64_t count = 1;
    for (const te::Var& v : vars) count *= v->extent;
    return ctx.b().Div(reduced, ctx.b().Constant(reduced->type, static_cast<double>(count)));
  };
  r.Register(std::move(def));
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  RegisterReduce(r, "sum", te::ReduceOp::kSum, "sum over `axes` (all by default)");
  RegisterReduce(r, "max", te::ReduceOp::kMax, "maximum over `axes` (all by default)");
  RegisterReduce(r, "min", te::ReduceOp::kMin, "minimum over `axes` (all by default)");
  RegisterReduce(r, "prod", te::ReduceOp::kProd, "product over `axes` (all by default)");
  RegisterReduce(r, "mean", te::ReduceOp::kSum, "mean over `axes` (all by default)",
                 /*mean=*/true);
}

}  // namespace kiln
