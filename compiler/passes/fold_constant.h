// Replaces every op node whose inputs are all constants by a constant holding
// its value, computed on the host from the op's own compute definition.
#ifndef KILN_COMPILER_PASSES_FOLD_CONSTANT_H_
#define KILN_COMPILER_PASSES_FOLD_CONSTANT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

#include "compiler/pass/pass.h"

namespace kiln {

// Folding evaluates element by element; larger results are left to kernels.
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

std::unique_ptr<Pass> CreateFoldConstantPass();

// The value of typed op node `n`, all of whose inputs are constants, computed
// on the host from the op's compute definition (importers use it for shape
// subgraphs). InvalidArgument when it is not foldable or too large.
absl::StatusOr<std::shared_ptr<const ConstantData>> EvaluateConstantNode(const Node& n);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FOLD_CONSTANT_H_
