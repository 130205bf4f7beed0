#include "compiler/passes/eliminate_common_subexpr.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"

namespace kiln {
namespace {

// A key equal for nodes that compute the same value, given that their inputs
// have already been canonicalised (topological order guarantees it).
std::string ValueKey(const Node& n) {
  if (n.is_constant()) {
    return absl::StrCat("const:", n.type.ToString(), ":", n.value->bytes.view());
  }
  std::string key = absl::StrCat("op:", n.op->name, "(");
  for (const Node* in : n.inputs) absl::StrAppend(&key, reinterpret_cast<uintptr_t>(in), ",");
  absl::StrAppend(&key, ")");
  AppendAttrsCanonical(n.attrs, key);
  return key;
}

absl::StatusOr<bool> EliminateCommonSubexpr(Graph& graph, const PassContext&) {
  std::unordered_map<std::string, Node*> seen;
  std::unordered_map<Node*, Node*> replaced;
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (n->is_input()) continue;
    for (Node*& in : n->inputs) {
      auto r = replaced.find(in);
      if (r != replaced.end()) in = r->second;
    }
    auto [it, inserted] = seen.emplace(ValueKey(*n), n);
    if (!inserted) {
      replaced[n] = it->second;
      changed = true;
    }
  }
  for (auto& [from, to] : replaced) graph.ReplaceAllUses(from, to);
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateEliminateCommonSubexprPass() {
  return std::make_unique<FunctionPass>(PassInfo{"EliminateCommonSubexpr", 3, {"InferType"}},
                                        EliminateCommonSubexpr);
}

}  // namespace kiln
