#include "compiler/passes/fold_constant.h"

#include "absl/status/status.h"

#include <vector>

#include "compiler/ir/op_def.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/evaluator.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

std::shared_ptr<const ConstantData> Evaluate(const Node& n) {
  te::ExprBuilder b;
  std::vector<te::Var> vars;
  std::vector<te::Expr> idx;
  for (size_t d = 0; d < n.type.shape.size(); ++d) {
    vars.push_back(b.NewVar("i" + std::to_string(d), n.type.shape[d]));
    idx.push_back(b.Ref(vars.back()));
  }
  std::vector<TensorType> in_types;
  std::vector<te::Accessor> accessors;
  std::vector<te::EvalBuffer> buffers;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Node* in = n.inputs[i];
    in_types.push_back(in->type);
    te::ScalarType st = te::ScalarTypeOf(in->type.dtype);
    buffers.push_back({in->type.dtype, in->type.shape, in->value->bytes.data()});
    accessors.push_back([&b, i, st](const std::vector<te::Expr>& indices) {
      return b.Load(static_cast<int>(i), st, indices);
    });
  }
  te::ComputeContext ctx(b, n.attrs, in_types, n.type, std::move(accessors), idx);
  te::Expr value = n.op->compute(ctx);
  auto data = std::make_shared<ConstantData>();
  data->type = n.type;
  data->bytes.resize(n.type.ByteSize());
  te::EvaluateIntoBuffer(value, vars, n.type.shape, buffers, n.type.dtype, data->bytes.data());
  return data;
}

absl::StatusOr<bool> FoldConstants(Graph& graph, const PassContext&) {
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->is_op() || n->inputs.empty()) continue;
    bool all_constant = true;
    for (const Node* in : n->inputs) all_constant &= in->is_constant();
    if (!all_constant || n->type.NumElements() > kMaxFoldedElements) continue;
    Node* folded = graph.AddConstant(n->name, Evaluate(*n));
    graph.ReplaceAllUses(n, folded);
    changed = true;
  }
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ConstantData>> EvaluateConstantNode(const Node& n) {
  if (!n.is_op() || !n.type_known) return absl::InvalidArgumentError("not a typed op node");
  for (const Node* in : n.inputs) {
    if (!in->is_constant()) return absl::InvalidArgumentError("an input is not constant");
  }
  if (n.type.NumElements() > kMaxFoldedElements) {
    return absl::InvalidArgumentError("too large to fold");
  }
  return Evaluate(n);
}

std::unique_ptr<Pass> CreateFoldConstantPass() {
  return std::make_unique<FunctionPass>(PassInfo{"FoldConstant", 2, {"InferType"}},
                                        FoldConstants);
}

}  // namespace kiln
