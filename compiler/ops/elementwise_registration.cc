#include "compiler/ops/elementwise_registration.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/shape_relations.h"

namespace kiln {

using te::BinaryOp;
using te::ComputeContext;
using te::Expr;

absl::StatusOr<TensorType> BroadcastRelation(const std::vector<TensorType>& in, const Attrs&) {
  if (in[0].dtype != in[1].dtype) {
    return absl::InvalidArgumentError(absl::StrCat("operand dtypes differ: ",
                                                   in[0].ToString(), " vs ", in[1].ToString()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, BroadcastShapes(in[0].shape, in[1].shape));
  return TensorType{in[0].dtype, std::move(shape)};
}

absl::StatusOr<TensorType> NumericBroadcastRelation(const std::vector<TensorType>& in,
                                                    const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(SameNumericRelation(in, attrs).status());
  return BroadcastRelation(in, attrs);
}

absl::StatusOr<TensorType> SameFloatRelation(const std::vector<TensorType>& in, const Attrs&) {
  KILN_RETURN_IF_ERROR(RequireFloat(in));
  return in[0];
}

absl::StatusOr<TensorType> SameNumericRelation(const std::vector<TensorType>& in,
                                               const Attrs&) {
  if (in[0].dtype == DType::kBool) {
    return absl::InvalidArgumentError("bool tensors are not supported here");
  }
  return in[0];
}

void RegisterBinary(
    OpRegistry& r, const char* name, BinaryOp op, const char* summary,
    std::function<absl::StatusOr<TensorType>(const std::vector<TensorType>&, const Attrs&)>
        relation) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kBroadcast;
  def.min_inputs = def.max_inputs = 2;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = std::move(relation);
  def.compute = [op](ComputeContext& ctx) {
    return ctx.b().Binary(op, ctx.BroadcastInput(0), ctx.BroadcastInput(1));
  };
  r.Register(std::move(def));
}

void RegisterUnary(OpRegistry& r, const char* name, const char* summary, bool float_only,
                   std::function<Expr(ComputeContext&, Expr)> f) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kElemWise;
  def.min_inputs = def.max_inputs = 1;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = float_only ? SameFloatRelation : SameNumericRelation;
  def.compute = [f](ComputeContext& ctx) { return f(ctx, ctx.Input(0, ctx.out())); };
  r.Register(std::move(def));
}

void RegisterCompare(OpRegistry& r, const char* name, te::CompareOp op, const char* summary) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kBroadcast;
  def.min_inputs = def.max_inputs = 2;
  def.summary = summary;
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_ASSIGN_OR_RETURN(TensorType t, BroadcastRelation(in, attrs));
    t.dtype = DType::kBool;
    return t;
  };
  def.compute = [op](ComputeContext& ctx) {
    return ctx.b().Compare(op, ctx.BroadcastInput(0), ctx.BroadcastInput(1));
  };
  r.Register(std::move(def));
}

// An elementwise op with ActivationAttrs read from two named float attributes.
void RegisterActivation(OpRegistry& r, const char* name, const char* summary,
                        const char* alpha_name, float alpha_default, const char* beta_name,
                        float beta_default,
                        std::function<Expr(ComputeContext&, Expr, const ActivationAttrs&)> f) {
  OpDef def;
  def.name = name;
  def.pattern = OpPattern::kElemWise;
  def.summary = summary;
  std::string alpha_key = alpha_name, beta_key = beta_name;
  def.parse_attrs = [=](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    for (const auto& [key, value] : raw) {
      if (key != alpha_key && key != beta_key) {
        return absl::InvalidArgumentError(absl::StrCat("unknown attribute '", key, "'"));
      }
    }
    ActivationAttrs a;
    KILN_ASSIGN_OR_RETURN(a.alpha, GetFloatAttr(raw, alpha_key, alpha_default));
    KILN_ASSIGN_OR_RETURN(a.beta, GetFloatAttr(raw, beta_key, beta_default));
    return Attrs(a);
  };
  def.infer_type = SameFloatRelation;
  def.compute = [f](ComputeContext& ctx) {
    return f(ctx, ctx.Input(0, ctx.out()), ctx.attrs<ActivationAttrs>());
  };
  r.Register(std::move(def));
}

}  // namespace kiln
