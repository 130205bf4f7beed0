#include "compiler/passes/infer_type.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compiler/ir/index_range.h"
#include "compiler/ir/op_def.h"

namespace kiln {

absl::StatusOr<bool> InferTypes(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->is_op()) continue;
    std::vector<TensorType> in_types;
    for (const Node* in : n->inputs) in_types.push_back(in->type);
    absl::StatusOr<TensorType> type = n->op->infer_type(in_types, n->attrs);
    if (!type.ok()) {
      std::vector<std::string> shown;
      for (const TensorType& t : in_types) shown.push_back(t.ToString());
      return absl::InvalidArgumentError(absl::StrCat("node '", n->name, "' (", n->op->name,
                                                     ") with inputs (", absl::StrJoin(shown, ", "),
                                                     "): ", type.status().message()));
    }
    absl::StatusOr<int64_t> elements = CheckedNumElements(type->shape);
    if (!elements.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n->name, "' output: ", elements.status().message()));
    }
    if (n->op->index_operand) {
      // Constant indices out of range can never work: refused here rather
      // than clamped by the kernel.
      std::optional<IndexOperand> index = n->op->index_operand(in_types, n->attrs);
      const Node* indices = index ? n->inputs[index->input] : nullptr;
      if (indices != nullptr && indices->is_constant() && indices->value &&
          IsIntegerDType(indices->value->type.dtype)) {
        KILN_RETURN_IF_ERROR(CheckIndicesInRange(
            indices->value->type.dtype, indices->value->bytes.data(),
            indices->value->type.NumElements(), index->size,
            absl::StrCat("node '", n->name, "' (", n->op->name, ")")));
      }
    }
    if (!n->type_known || n->type != *type) changed = true;
    n->type = *std::move(type);
    n->type_known = true;
  }
  return changed;
}

std::unique_ptr<Pass> CreateInferTypePass() {
  return std::make_unique<FunctionPass>(
      PassInfo{"InferType", 0, {}},
      [](Graph& graph, const PassContext&) { return InferTypes(graph); });
}

}  // namespace kiln
