#include "compiler/passes/graph_at_rows.h"

#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ir/op_def.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/row_independence.h"

namespace kiln {

absl::StatusOr<Graph> GraphAtRows(const Graph& graph, int64_t rows, int64_t new_rows) {
  if (new_rows < 1) return absl::InvalidArgumentError("rows must be positive");
  KILN_ASSIGN_OR_RETURN(const auto carrying, RowCarryingValues(graph, rows));
  Graph resized = graph.Clone();
  std::unordered_map<int64_t, const Node*> original;  // by id: a clone keeps every node's
  for (const Node* n : graph.AllNodes()) original[n->id] = n;
  // What every node's type must be at new_rows.
  std::unordered_map<const Node*, TensorType> want;
  for (Node* n : resized.AllNodes()) {
    const Node* o = original.at(n->id);
    TensorType type = o->type;
    auto it = carrying.find(o);
    if (it != carrying.end()) {
      const RowDim& r = it->second;
      type.shape[r.axis] = r.outer * new_rows * r.inner;
    }
    want[n] = type;
    if (n->is_input()) n->type = type;
    if (it != carrying.end() && n->is_op() && n->op_name() == "reshape") {
      n->attrs = ReshapeAttrs{type.shape};
    }
    // An expand's target (aligned with the output's trailing dims) names
    // the rows' dim at the whole batch's size.
    if (it != carrying.end() && n->is_op() && n->op_name() == "expand") {
      std::vector<int64_t>& target = std::get<ReshapeAttrs>(n->attrs).shape;
      const int64_t at = it->second.axis - static_cast<int64_t>(type.shape.size()) +
                         static_cast<int64_t>(target.size());
      if (at >= 0 && target[at] == o->type.shape[it->second.axis]) {
        target[at] = type.shape[it->second.axis];
      }
    }
  }
  if (absl::StatusOr<bool> typed = InferTypes(resized); !typed.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the graph does not type at ", new_rows, " rows: ", typed.status().message()));
  }
  for (const Node* n : resized.AllNodes()) {
    if (n->type != want.at(n)) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", n->name, "' (", n->is_op() ? n->op_name() : "value", ") is ",
                       n->type.ToString(), " at ", new_rows, " rows, not ", want.at(n).ToString(),
                       ": something in it holds the batch size"));
    }
  }
  return resized;
}

}  // namespace kiln
