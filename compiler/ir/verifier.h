// The invariants every graph keeps between passes: acyclic, every input of a
// node is a node of this graph, op arity within the op's bounds, at least one
// output, and the node count under kMaxGraphNodes.
#ifndef KILN_COMPILER_IR_VERIFIER_H_
#define KILN_COMPILER_IR_VERIFIER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compiler/ir/graph.h"

namespace kiln {

// The most nodes any graph may have; importers take a lower limit of the
// server's choosing (--max-graph-nodes).
inline constexpr int64_t kMaxGraphNodes = 200000;

// ResourceExhausted "the graph has N nodes, more than the limit of M"
// (payload kLimitPayload: which limit) when `nodes` > `limit`.
absl::Status CheckNodeLimit(int64_t nodes, int64_t limit);
inline constexpr char kLimitPayload[] = "kiln.limit";
inline constexpr char kNodeLimitName[] = "max_graph_nodes";

// InvalidArgument naming the offending node; ResourceExhausted (as
// CheckNodeLimit) past kMaxGraphNodes.
absl::Status VerifyGraph(const Graph& graph);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_VERIFIER_H_
