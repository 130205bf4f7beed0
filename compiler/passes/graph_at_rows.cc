#include "compiler/passes/graph_at_rows.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
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
    // A slice's sizes are its output's shape; along the rows it takes them
    // all, from 0 by 1 (else it would read another row: not independent).
    if (it != carrying.end() && n->is_op() && n->op_name() == "slice") {
      std::get<SliceAttrs>(n->attrs).sizes = type.shape;
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
  // A constant of one value as tall as the whole batch where a row-carrying
  // op broadcasts it over the rows (the zeros PyTorch's attention selects
  // from, [B * H, 1, S]) is made as tall as the new batch: any row of it is
  // any other. One new constant per constant and height, however many ops
  // read it.
  std::map<std::pair<const Node*, std::vector<int64_t>>, Node*> remade;
  for (Node* n : resized.AllNodes()) {
    auto it = n->is_op() ? carrying.find(original.at(n->id)) : carrying.end();
    if (it == carrying.end()) continue;
    const int64_t axis = it->second.axis;
    const std::vector<int64_t>& was = original.at(n->id)->type.shape;
    for (Node*& in : n->inputs) {
      if (!in->is_constant() || !OneValueRepeated(in)) continue;
      const int64_t at = axis - static_cast<int64_t>(was.size()) + in->type.rank();
      if (at < 0 || in->type.shape[at] != was[axis] || was[axis] == want.at(n).shape[axis]) {
        continue;
      }
      std::vector<int64_t> shape = in->type.shape;
      shape[at] = want.at(n).shape[axis];
      Node*& made = remade[{in, shape}];
      if (made != nullptr) {
        in = made;
        continue;
      }
      auto data = std::make_shared<ConstantData>();
      data->type = TensorType{in->type.dtype, shape};
      const absl::string_view one = in->value->bytes.view().substr(0, DTypeSize(in->type.dtype));
      std::string bytes;
      for (int64_t e = 0; e < data->type.NumElements(); ++e) bytes.append(one.data(), one.size());
      data->bytes.assign(bytes.data(), bytes.size());
      made = resized.AddConstant(absl::StrCat(in->name, ".at_", new_rows, "_rows"), data);
      want[made] = made->type;
      in = made;
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
