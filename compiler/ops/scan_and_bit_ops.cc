// cumsum (ONNX CumSum) and the bit shifts (ONNX BitShift).
//
// cumsum is written as a reduction: y[.., i, ..] = sum over k of x[.., k, ..]
// where k is before i (or after, reversed; itself included unless
// exclusive). That is n^2 / 2 adds for a scan of n, where a sequential scan
// needs n; it keeps the op an ordinary CommReduce expression that fusion,
// vectorisation and the constant folder already handle, and the axes real
// models scan (a padding mask into position ids, a few thousand tokens)
// stay cheap next to the model around them.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/elementwise_registration.h"
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

void RegisterCumSum(OpRegistry& r) {
  OpDef def;
  def.name = "cumsum";
  def.pattern = OpPattern::kCommReduce;
  def.summary = "running sum along `axis` (attributes exclusive, reverse: 0 or 1)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis", "exclusive", "reverse"}));
    ScanAttrs a;
    KILN_ASSIGN_OR_RETURN(a.axis, GetIntAttr(raw, "axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t exclusive, GetIntAttr(raw, "exclusive", 0));
    KILN_ASSIGN_OR_RETURN(int64_t reverse, GetIntAttr(raw, "reverse", 0));
    a.exclusive = exclusive != 0;
    a.reverse = reverse != 0;
    return Attrs(a);
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    if (in[0].dtype == DType::kBool) return absl::InvalidArgumentError("cannot sum bool");
    KILN_RETURN_IF_ERROR(NormalizeAxis(std::get<ScanAttrs>(attrs).axis, in[0].rank()).status());
    return in[0];
  };
  def.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    const ScanAttrs& a = ctx.attrs<ScanAttrs>();
    const int64_t rank = ctx.input_type(0).rank();
    const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
    te::Var k = ctx.ReduceVar("k", ctx.input_type(0).shape[axis]);
    std::vector<Expr> idx = ctx.out();
    const Expr i = idx[axis];
    idx[axis] = b.Ref(k);
    const CompareOp op = a.reverse ? (a.exclusive ? CompareOp::kGT : CompareOp::kGE)
                                   : (a.exclusive ? CompareOp::kLT : CompareOp::kLE);
    Expr x = ctx.Input(0, idx);
    Expr term = b.Select(b.Compare(op, b.Ref(k), i), x, b.Constant(x->type, 0));
    return b.Reduce(te::ReduceOp::kSum, {k}, term);
  };
  r.Register(std::move(def));
}

// x << y or x >> y (integers, NumPy-broadcast), as ONNX's BitShift.
absl::StatusOr<TensorType> IntegerBroadcastRelation(const std::vector<TensorType>& in,
                                                    const Attrs& attrs) {
  if (!IsIntegerDType(in[0].dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bit shifts take integers, got ", DTypeName(in[0].dtype)));
  }
  return BroadcastRelation(in, attrs);
}

}  // namespace

void RegisterScanAndBitOps(OpRegistry& r) {
  RegisterCumSum(r);
  RegisterBinary(r, "shift_left", BinaryOp::kShl, "x << y (integers; 0 past the width)",
                 IntegerBroadcastRelation);
  RegisterBinary(r, "shift_right", BinaryOp::kShr,
                 "x >> y (integers, logical: zeros shift in; 0 past the width)",
                 IntegerBroadcastRelation);
}

}  // namespace kiln
