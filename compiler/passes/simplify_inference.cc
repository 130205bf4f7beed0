#include "compiler/passes/simplify_inference.h"

#include "common/status_macros.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"

namespace kiln {
namespace {

std::shared_ptr<ConstantData> ScalarConstant(float v) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, {}};
  data->bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
  return data;
}

// x * scale + shift, with scale = gamma / sqrt(var + eps) and
// shift = beta - mean * scale, both reshaped to broadcast along `axis`.
Node* ExpandBatchNorm(Graph& g, const OpRegistry& ops, Node* bn) {
  const BatchNormAttrs& a = std::get<BatchNormAttrs>(bn->attrs);
  const int64_t rank = bn->inputs[0]->type.rank();
  const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  const std::string& n = bn->name;
  Node* x = bn->inputs[0];
  Node* gamma = bn->inputs[1];
  Node* beta = bn->inputs[2];
  Node* mean = bn->inputs[3];
  Node* var = bn->inputs[4];
  Node* eps = g.AddConstant(n + "/epsilon", ScalarConstant(a.epsilon));
  Node* std_dev = g.AddOp(n + "/std", ops.Find("sqrt"),
                          {g.AddOp(n + "/var_eps", ops.Find("add"), {var, eps}, NoAttrs{})},
                          NoAttrs{});
  Node* scale = g.AddOp(n + "/scale", ops.Find("div"), {gamma, std_dev}, NoAttrs{});
  Node* shift = g.AddOp(n + "/shift", ops.Find("sub"),
                        {beta, g.AddOp(n + "/mean_scale", ops.Find("mul"), {mean, scale}, NoAttrs{})},
                        NoAttrs{});
  // [C] -> [C, 1, ..., 1] so that it lines up with `axis` under broadcasting.
  std::vector<int64_t> shape{-1};
  for (int64_t d = axis + 1; d < rank; ++d) shape.push_back(1);
  Node* scale_b = g.AddOp(n + "/scale_b", ops.Find("reshape"), {scale}, ReshapeAttrs{shape});
  Node* shift_b = g.AddOp(n + "/shift_b", ops.Find("reshape"), {shift}, ReshapeAttrs{shape});
  Node* scaled = g.AddOp(n + "/scaled", ops.Find("mul"), {x, scale_b}, NoAttrs{});
  return g.AddOp(n, ops.Find("add"), {scaled, shift_b}, NoAttrs{});
}

absl::StatusOr<bool> SimplifyInference(Graph& graph, const PassContext&) {
  const OpRegistry& ops = OpRegistry::Default();
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->is_op()) continue;
    if (n->op->name == "dropout") {
      graph.ReplaceAllUses(n, n->inputs[0]);
      changed = true;
    } else if (n->op->name == "batch_norm") {
      graph.ReplaceAllUses(n, ExpandBatchNorm(graph, ops, n));
      changed = true;
    }
  }
  if (!changed) return false;
  graph.RemoveDeadNodes();
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

}  // namespace

std::unique_ptr<Pass> CreateSimplifyInferencePass() {
  return std::make_unique<FunctionPass>(PassInfo{"SimplifyInference", 0, {"InferType"}},
                                        SimplifyInference);
}

}  // namespace kiln
