// ONNX's loss operators: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss, composed from gathers, where and reductions.
#include <string>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {

// NegativeLogLikelihoodLoss of log-probabilities x [N, C, d...] at targets t
// [N, d...]: -x[n, t, d...] * weight[t], 0 where t is ignore_index, then
// reduced ("none", "sum", or "mean": over the weights that counted).
// Ignored targets are replaced by 0 before any gather, so that every index
// read is in range whatever ignore_index is.
absl::StatusOr<Node*> NllLoss(Converter& c, const onnx::NodeProto& n, Node* x, Node* t,
                              Node* weight) {
  const std::string reduction = StringAttr(n, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): reduction '", reduction, "'"));
  }
  if (x->type.rank() < 2 || t->type.rank() != x->type.rank() - 1 ||
      !IsFloatDType(x->type.dtype) ||
      (t->type.dtype != DType::kInt64 && t->type.dtype != DType::kInt32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", n.name(), "' (", n.op_type(), "): wants float [N, C, ...] and integer targets "
        "[N, ...], got ", x->type.ToString(), " and ", t->type.ToString()));
  }
  Node* mask = nullptr;  // where the target counts
  Node* target = t;
  if (FindAttr(n, "ignore_index") != nullptr) {
    Node* ignored = c.ScalarOf(n.name() + "/ignore_index", t->type.dtype,
                               static_cast<double>(IntAttr(n, "ignore_index", 0)));
    KILN_ASSIGN_OR_RETURN(Node* is_ignored, c.Add(n, "equal", {t, ignored}, NoAttrs{}, "/ignored"));
    KILN_ASSIGN_OR_RETURN(mask, c.Add(n, "logical_not", {is_ignored}, NoAttrs{}, "/counts"));
    KILN_ASSIGN_OR_RETURN(target, c.Add(n, "where", {mask, t, c.ScalarOf(n.name() + "/zero_target",
                                                                         t->type.dtype, 0)},
                                        NoAttrs{}, "/target"));
  }
  std::vector<int64_t> picked_shape = t->type.shape;
  picked_shape.insert(picked_shape.begin() + 1, 1);
  KILN_ASSIGN_OR_RETURN(Node* index, c.Add(n, "reshape", {target}, ReshapeAttrs{picked_shape},
                                           "/index"));
  KILN_ASSIGN_OR_RETURN(Node* picked, c.Add(n, "gather_elements", {x, index}, AxisAttrs{1},
                                            "/picked"));
  KILN_ASSIGN_OR_RETURN(picked, c.Add(n, "reshape", {picked}, ReshapeAttrs{t->type.shape},
                                      "/picked_flat"));
  KILN_ASSIGN_OR_RETURN(Node* loss, c.Add(n, "neg", {picked}, NoAttrs{}, "/nll"));
  Node* w = nullptr;  // each element's weight, where weights or a mask apply
  if (weight != nullptr) {
    KILN_ASSIGN_OR_RETURN(w, c.Add(n, "gather", {weight, target}, AxisAttrs{0}, "/weight"));
  }
  if (mask != nullptr) {
    Node* one = c.ScalarOf(n.name() + "/one", x->type.dtype, 1);
    Node* zero = c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
    KILN_ASSIGN_OR_RETURN(w, c.Add(n, "where", {mask, w ? w : one, zero}, NoAttrs{}, "/masked"));
  }
  if (w != nullptr) {
    KILN_ASSIGN_OR_RETURN(loss, c.Add(n, "mul", {loss, w}, NoAttrs{}, "/weighted"));
  }
  if (reduction == "none") return loss;
  KILN_ASSIGN_OR_RETURN(Node* total, c.Add(n, "sum", {loss}, ReduceAttrs{{}, false},
                                           reduction == "sum" ? "" : "/total"));
  if (reduction == "sum") return total;
  Node* count;
  if (w != nullptr) {
    KILN_ASSIGN_OR_RETURN(count, c.Add(n, "sum", {w}, ReduceAttrs{{}, false}, "/weight_total"));
  } else {
    count = c.ScalarOf(n.name() + "/count", x->type.dtype,
                       static_cast<double>(t->type.NumElements()));
  }
  return c.Add(n, "div", {total, count});
}

absl::Status ConvertNllLoss(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* t, c.Value(n, 1));
  Node* weight = nullptr;
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(weight, c.Value(n, 2));
  }
  KILN_ASSIGN_OR_RETURN(Node* loss, NllLoss(c, n, x, t, weight));
  return c.Define(n.output(0), loss);
}

// SoftmaxCrossEntropyLoss: NLL of log_softmax over the class axis (1); the
// optional second output is that log_softmax.
absl::Status ConvertSoftmaxCrossEntropy(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* scores, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* t, c.Value(n, 1));
  Node* weight = nullptr;
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(weight, c.Value(n, 2));
  }
  if (scores->type.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(),
                                                   "' (SoftmaxCrossEntropyLoss): scores ",
                                                   scores->type.ToString(), " need [N, C, ...]"));
  }
  KILN_ASSIGN_OR_RETURN(Node* log_prob, c.Add(n, "log_softmax", {scores}, AxisAttrs{1},
                                              "/log_prob"));
  KILN_ASSIGN_OR_RETURN(Node* loss, NllLoss(c, n, log_prob, t, weight));
  if (n.output_size() > 1 && !n.output(1).empty()) {
    KILN_RETURN_IF_ERROR(c.Define(n.output(1), log_prob));
  }
  return c.Define(n.output(0), loss);
}

}  // namespace

void AddLossConverters(ConverterMap& table) {
  table["NegativeLogLikelihoodLoss"] = ConvertNllLoss;
  table["SoftmaxCrossEntropyLoss"] = ConvertSoftmaxCrossEntropy;
}

}  // namespace kiln::onnx_import
