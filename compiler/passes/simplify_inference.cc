#include "compiler/passes/simplify_inference.h"

#include <cmath>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"

namespace kiln {
namespace {

std::shared_ptr<ConstantData> ScalarConstant(float v, std::vector<int64_t> shape = {}) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, std::move(shape)};
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

// The float32 value of a one-element float32 constant, if `n` is one.
std::optional<float> OneFloatConstant(const Node* n) {
  if (!n->is_constant() || n->value->type.dtype != DType::kFloat32 ||
      n->value->type.NumElements() != 1) {
    return std::nullopt;
  }
  return n->value->data<float>()[0];
}

// For every op node: true when it has uses and all of them are erf ops
// (a graph output is a use that is not).
std::unordered_map<const Node*, bool> FeedsOnlyErf(const Graph& graph,
                                                   const std::vector<Node*>& order) {
  std::unordered_map<const Node*, bool> only_erf;
  for (Node* n : order) {
    if (!n->is_op()) continue;
    for (Node* in : n->inputs) {
      auto [it, fresh] = only_erf.emplace(in, true);
      it->second = it->second && n->op->name == "erf";
    }
  }
  for (Node* out : graph.outputs()) only_erf[out] = false;
  return only_erf;
}

// erf(x / c) -> erf(x * (1 / c)) for a one-element constant c: GELU's
// x / sqrt(2) as PyTorch exports it was one vdivps per 16 outputs in the
// matmul epilogues it fuses into (convnext_tiny's K=96 GELU matmuls took
// 1.20 ms, 1.12 with this and erf's cheaper clamps; AMD EPYC Zen 5, one
// thread). 1 / c rounded to float is the constant PyTorch's own GELU
// multiplies by for c = float32(sqrt 2) (M_SQRT1_2). The product is within
// an ulp of the quotient, and erf passes at most that relative change on
// (x erf'(x) / erf(x) < 1). Only where erf consumes it: elsewhere a division
// by a constant keeps its correctly rounded result (LLVM already multiplies
// when 1 / c is exact).
Node* DivideByMultiplying(Graph& g, const OpRegistry& ops, Node* div, float c) {
  const float inverse = static_cast<float>(1.0 / static_cast<double>(c));
  Node* constant =
      g.AddConstant(div->name + "/reciprocal", ScalarConstant(inverse, div->inputs[1]->type.shape));
  return g.AddOp(div->name, ops.Find("mul"), {div->inputs[0], constant}, NoAttrs{});
}

absl::StatusOr<bool> SimplifyInference(Graph& graph, const PassContext&) {
  const OpRegistry& ops = OpRegistry::Default();
  bool changed = false;
  const std::vector<Node*> order = graph.TopologicalOrder();
  const std::unordered_map<const Node*, bool> only_erf = FeedsOnlyErf(graph, order);
  for (Node* n : order) {
    if (!n->is_op()) continue;
    if (n->op->name == "div" && n->type.dtype == DType::kFloat32 && only_erf.count(n) != 0 &&
        only_erf.at(n)) {
      const std::optional<float> c = OneFloatConstant(n->inputs[1]);
      if (c.has_value() && std::isnormal(*c) && std::isnormal(1.0f / *c)) {
        graph.ReplaceAllUses(n, DivideByMultiplying(graph, ops, n, *c));
        changed = true;
      }
    } else if (n->op->name == "dropout") {
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
