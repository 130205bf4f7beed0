// Types every op node from its inputs through the op's type relation.
#ifndef KILN_COMPILER_PASSES_INFER_TYPE_H_
#define KILN_COMPILER_PASSES_INFER_TYPE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/pass/pass.h"

namespace kiln {

// InvalidArgument naming the node, its op, and the input types, on a mismatch.
absl::StatusOr<bool> InferTypes(Graph& graph);

std::unique_ptr<Pass> CreateInferTypePass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_INFER_TYPE_H_
