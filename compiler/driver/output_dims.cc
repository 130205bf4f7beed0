#include "compiler/driver/output_dims.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler/passes/infer_type.h"

namespace kiln {
namespace {

// The output shapes of the graph imported at `shapes`, in output order.
absl::StatusOr<std::vector<std::vector<int64_t>>> OutputShapesAt(const ImportAtShapes& import_at,
                                                                 const InputShapes& shapes) {
  absl::StatusOr<Graph> graph = import_at(shapes, {});
  if (!graph.ok()) return graph.status();
  absl::StatusOr<bool> typed = InferTypes(*graph);
  if (!typed.ok()) return typed.status();
  std::vector<std::vector<int64_t>> out;
  for (const Node* node : graph->outputs()) out.push_back(node->type.shape);
  return out;
}

}  // namespace

absl::Status FillOutputDims(ModelSignature& signature, const ImportAtShapes& import_at,
                            const InputShapes& load) {
  bool needed = false;
  for (const TensorSignature& out : signature.outputs) needed |= !out.has_shape;
  if (!needed) return absl::OkStatus();

  // Every symbolic input dim larger, each named symbol by its own step so
  // that an output dim can be traced to one; each named symbol's two sizes.
  std::map<std::string, int64_t> step;
  for (const TensorSignature& in : signature.inputs) {
    for (const std::string& symbol : in.symbols) {
      if (!symbol.empty()) step.emplace(symbol, 0);
    }
  }
  int64_t next_step = 1;
  for (auto& [symbol, s] : step) s = next_step++;
  InputShapes larger = load;
  std::map<std::string, std::pair<int64_t, int64_t>> symbol_sizes;
  for (const TensorSignature& in : signature.inputs) {
    auto it = larger.find(in.name);
    if (it == larger.end() || it->second.size() != in.dims.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no load-time shape of rank ", in.dims.size(), " for input '", in.name,
                       "'"));
    }
    for (size_t d = 0; d < in.dims.size(); ++d) {
      if (in.dims[d] != TensorSignature::kSymbolicDim) continue;
      const int64_t size = it->second[d];
      const int64_t grown = size + (in.symbols[d].empty() ? next_step : step[in.symbols[d]]);
      it->second[d] = grown;
      if (!in.symbols[d].empty()) symbol_sizes[in.symbols[d]] = {size, grown};
    }
  }
  absl::StatusOr<std::vector<std::vector<int64_t>>> at_load = OutputShapesAt(import_at, load);
  if (!at_load.ok()) return at_load.status();
  absl::StatusOr<std::vector<std::vector<int64_t>>> at_larger = OutputShapesAt(import_at, larger);
  // A model that cannot take the larger sizes keeps its outputs undeclared.
  if (!at_larger.ok()) return absl::OkStatus();
  if (at_load->size() != signature.outputs.size() || at_larger->size() != at_load->size()) {
    return absl::OkStatus();
  }
  for (size_t o = 0; o < signature.outputs.size(); ++o) {
    TensorSignature& out = signature.outputs[o];
    const std::vector<int64_t>& a = (*at_load)[o];
    const std::vector<int64_t>& b = (*at_larger)[o];
    if (out.has_shape || a.size() != b.size()) continue;
    out.dims.clear();
    out.symbols.clear();
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d]) {
        out.dims.push_back(a[d]);
        out.symbols.emplace_back();
        continue;
      }
      out.dims.push_back(TensorSignature::kSymbolicDim);
      std::string named;
      for (const auto& [symbol, sizes] : symbol_sizes) {
        if (sizes == std::make_pair(a[d], b[d])) named = symbol;
      }
      out.symbols.push_back(named);
    }
    out.has_shape = true;
  }
  return absl::OkStatus();
}

}  // namespace kiln
