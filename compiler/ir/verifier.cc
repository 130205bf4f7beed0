#include "compiler/ir/verifier.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ir/op_def.h"

namespace kiln {

absl::Status CheckNodeLimit(int64_t nodes, int64_t limit) {
  if (nodes <= limit) return absl::OkStatus();
  absl::Status s = absl::ResourceExhaustedError(
      absl::StrCat("the graph has ", nodes, " nodes, more than the limit of ", limit));
  s.SetPayload(kLimitPayload, absl::Cord(kNodeLimitName));
  return s;
}

absl::Status VerifyGraph(const Graph& graph) {
  KILN_RETURN_IF_ERROR(CheckNodeLimit(graph.num_nodes(), kMaxGraphNodes));
  if (graph.outputs().empty()) return absl::InvalidArgumentError("graph has no outputs");
  std::vector<Node*> all = graph.AllNodes();
  std::unordered_set<const Node*> members(all.begin(), all.end());
  for (const Node* n : all) {
    for (const Node* in : n->inputs) {
      if (!members.count(in)) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", n->name, "' reads a value outside the graph"));
      }
    }
    if (n->is_op()) {
      const int arity = static_cast<int>(n->inputs.size());
      if (arity < n->op->min_inputs || arity > n->op->max_inputs) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", n->name, "' (", n->op->name, ") has ", arity, " inputs; expected ",
            n->op->min_inputs == n->op->max_inputs
                ? absl::StrCat(n->op->min_inputs)
                : absl::StrCat(n->op->min_inputs, " to ", n->op->max_inputs)));
      }
    } else if (!n->inputs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input or constant '", n->name, "' has inputs"));
    }
  }
  // Cycle check: iterative three-colour DFS over every node.
  enum Colour { kWhite, kGrey, kBlack };
  std::unordered_map<const Node*, Colour> colour;
  for (const Node* root : all) {
    if (colour[root] != kWhite) continue;
    std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};
    colour[root] = kGrey;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        const Node* in = node->inputs[next++];
        Colour c = colour[in];
        if (c == kGrey) {
          return absl::InvalidArgumentError(absl::StrCat(
              "graph has a cycle through node '", in->name, "' (read by '", node->name, "')"));
        }
        if (c == kWhite) {
          colour[in] = kGrey;
          stack.push_back({in, 0});
        }
        continue;
      }
      colour[node] = kBlack;
      stack.pop_back();
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
