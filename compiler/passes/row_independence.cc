#include "compiler/passes/row_independence.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

absl::Status Refuse(const Node* n, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("rows are not independent at '", n->name, "' (", n->op_name(), "): ", why));
}

// The rows of a reshape's output, whose input holds them at `in_rows`: a
// reshape keeps row-major order, so the elements before the rows (`before`)
// and after one row's first (`after`) stay; an output dim splitting them
// there holds the rows.
std::optional<RowDim> RowsAfterReshape(const TensorType& in, RowDim in_rows, const TensorType& out,
                                       int64_t rows) {
  int64_t before = in_rows.outer, after = in_rows.inner;
  for (int a = 0; a < in_rows.axis; ++a) before *= in.shape[a];
  for (size_t a = in_rows.axis + 1; a < in.shape.size(); ++a) after *= in.shape[a];
  int64_t leading = 1;
  for (size_t a = 0; a < out.shape.size(); ++a) {
    int64_t trailing = 1;
    for (size_t t = a + 1; t < out.shape.size(); ++t) trailing *= out.shape[t];
    if (leading > 0 && trailing > 0 && before % leading == 0 && after % trailing == 0) {
      RowDim r{static_cast<int>(a), before / leading, after / trailing};
      if (r.outer * rows * r.inner == out.shape[a]) return r;
    }
    leading *= out.shape[a];
  }
  return std::nullopt;
}

// What UsesRowBeyondReads may skip in input i's reads: its row dim when it
// carries rows, every index for a constant of one value repeated (what
// ConstantOfShape makes of a batch-sized shape: any row of it is any
// other), and none (kNone) otherwise.
constexpr int kNone = -1;
constexpr int kAnyIndex = -2;

// Whether `e` uses `row` other than as allowed by `skip` (per input, its
// row dim, kAnyIndex or kNone): an op comparing or computing with it (a
// triangle mask over the batch, say), or reading another tensor at it,
// would see a slice's local row numbers.
bool UsesRowBeyondReads(const te::Expr& e, const te::VarNode* row,
                        const std::vector<int>& row_dims) {
  std::unordered_set<const te::ExprNode*> seen;
  std::vector<const te::ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const te::ExprNode* x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    if (x->kind == te::ExprKind::kVar && x->var.get() == row) return true;
    const int skip = x->kind == te::ExprKind::kLoad && x->buffer >= 0 &&
                             x->buffer < static_cast<int>(row_dims.size())
                         ? row_dims[x->buffer]
                         : kNone;
    if (skip == kAnyIndex) continue;
    for (size_t o = 0; o < x->operands.size(); ++o) {
      if (static_cast<int>(o) != skip) stack.push_back(x->operands[o].get());
    }
  }
  return false;
}

// Where op node `n`'s output holds the rows, when each of its inputs in
// `carrying` is read only at its output's row.
absl::StatusOr<RowDim> RowDimOf(const Node* n,
                                const std::unordered_map<const Node*, RowDim>& carrying,
                                int64_t rows) {
  if (n->op_name() == "reshape") {
    std::optional<RowDim> r =
        RowsAfterReshape(n->inputs[0]->type, carrying.at(n->inputs[0]), n->type, rows);
    if (!r.has_value()) return Refuse(n, "it reshapes the rows across dims");
    return *r;
  }
  if (!n->op->compute) return Refuse(n, "the op has no compute to read rows from");
  te::ExprBuilder b;
  std::vector<te::Expr> out;
  for (size_t d = 0; d < n->type.shape.size(); ++d) {
    out.push_back(b.Ref(b.NewVar(absl::StrCat("o", d), n->type.shape[d])));
  }
  int out_axis = -1;  // the output axis every carrying input's rows are read at
  RowDim out_rows;    // and how they sit in it
  std::vector<bool> read(n->inputs.size(), false);
  std::string wrong;  // the first read of a carrying input at another row
  std::vector<TensorType> in_types;
  std::vector<te::Accessor> accessors;
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    const Node* in = n->inputs[i];
    in_types.push_back(in->type);
    auto it = carrying.find(in);
    const int in_axis = it == carrying.end() ? -1 : it->second.axis;
    const RowDim in_rows = it == carrying.end() ? RowDim{} : it->second;
    accessors.push_back([&, i, in, in_axis, in_rows](const std::vector<te::Expr>& idx) {
      if (in_axis >= 0) {
        read[i] = true;
        int axis = -1;
        if (in_axis < static_cast<int>(idx.size()) && idx[in_axis]->kind == te::ExprKind::kVar) {
          for (size_t d = 0; d < out.size(); ++d) {
            if (idx[in_axis]->var == out[d]->var) axis = static_cast<int>(d);
          }
        }
        if (axis >= 0 && out_axis < 0) {
          out_axis = axis;
          out_rows = RowDim{axis, in_rows.outer, in_rows.inner};
        }
        const bool same_split = in_rows.outer == out_rows.outer && in_rows.inner == out_rows.inner;
        if ((axis < 0 || axis != out_axis || !same_split) && wrong.empty()) {
          wrong = absl::StrCat(
              "input '", in->name, "' is read at index ",
              in_axis < static_cast<int>(idx.size()) ? te::ExprToString(idx[in_axis]) : "(none)",
              " of its rows' dim ", in_axis, ", not at an output row");
        }
      }
      return b.Load(static_cast<int>(i), te::ScalarTypeOf(in->type.dtype), idx);
    });
  }
  te::ComputeContext ctx(b, n->attrs, in_types, n->type, std::move(accessors), out);
  const te::Expr value = n->op->compute(ctx);
  if (!wrong.empty()) return Refuse(n, wrong);
  if (out_axis >= 0) {
    std::vector<int> row_dims;
    for (const Node* in : n->inputs) {
      auto it = carrying.find(in);
      row_dims.push_back(it != carrying.end() ? it->second.axis
                                              : (OneValueRepeated(in) ? kAnyIndex : kNone));
    }
    if (UsesRowBeyondReads(value, out[out_axis]->var.get(), row_dims)) {
      return Refuse(n, "it computes with the row's index (a slice's rows are numbered from 0)");
    }
  }
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    if (carrying.count(n->inputs[i]) && !read[i]) {
      return Refuse(
          n, absl::StrCat("input '", n->inputs[i]->name, "' is used for more than its elements"));
    }
  }
  if (out_axis < 0) return Refuse(n, "no output dim holds the rows");
  return out_rows;
}

}  // namespace

bool OneValueRepeated(const Node* n) {
  if (!n->is_constant() || n->value == nullptr) return false;
  const absl::string_view bytes = n->value->bytes.view();
  const size_t element = static_cast<size_t>(DTypeSize(n->type.dtype));
  const size_t count = static_cast<size_t>(n->type.NumElements());
  if (element == 0 || bytes.size() < count * element) return false;
  for (size_t i = 1; i < count; ++i) {
    if (bytes.compare(i * element, element, bytes.substr(0, element)) != 0) return false;
  }
  return true;
}

absl::Status CheckRowsIndependent(const Graph& graph, int64_t rows) {
  return RowCarryingValues(graph, rows).status();
}

absl::StatusOr<std::unordered_map<const Node*, RowDim>> RowCarryingValues(const Graph& graph,
                                                                          int64_t rows) {
  if (rows < 1) return absl::InvalidArgumentError("rows must be positive");
  std::unordered_map<const Node*, RowDim> carrying;  // node -> where it holds the rows
  for (const Node* in : graph.inputs()) {
    if (in->type.shape.empty() || in->type.shape[0] != rows) {
      return absl::FailedPreconditionError(absl::StrCat("input '", in->name, "' ",
                                                        in->type.ToString(), " does not have ",
                                                        rows, " rows as dim 0"));
    }
    carrying[in] = RowDim{};
  }
  for (const Node* n : graph.TopologicalOrder()) {
    if (!n->is_op()) continue;
    bool reads_rows = false;
    for (const Node* in : n->inputs) reads_rows |= carrying.count(in) > 0;
    if (!reads_rows) continue;
    if (!n->type_known) return Refuse(n, "its type is not inferred");
    absl::StatusOr<RowDim> where = RowDimOf(n, carrying, rows);
    if (!where.ok()) return where.status();
    carrying[n] = *where;
  }
  // The caller's tensors are sliced as contiguous runs: rows on dim 0.
  for (size_t o = 0; o < graph.outputs().size(); ++o) {
    auto it = carrying.find(graph.outputs()[o]);
    if (it == carrying.end() || it->second.axis != 0 || it->second.outer != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "output '", graph.output_names()[o], "' does not keep the rows of the inputs on dim 0"));
    }
  }
  return carrying;
}

}  // namespace kiln
