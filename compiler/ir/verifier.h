// The invariants every graph keeps between passes: acyclic, every input of a
// node is a node of this graph, op arity within the op's bounds, at least one
// output, and the node count under kMaxGraphNodes.
#ifndef KILN_COMPILER_IR_VERIFIER_H_
#define KILN_COMPILER_IR_VERIFIER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compiler/ir/graph.h"

namespace kiln {

inline constexpr int64_t kMaxGraphNodes = 200000;

// InvalidArgument naming the offending node.
absl::Status VerifyGraph(const Graph& graph);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_VERIFIER_H_
