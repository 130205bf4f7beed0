// Partitions a typed (and possibly fused) graph into kernels and lowers each
// fused group to a loop nest: the step from graph IR to the runtime's program.
#ifndef KILN_COMPILER_LOWER_BUILD_PROGRAM_H_
#define KILN_COMPILER_LOWER_BUILD_PROGRAM_H_

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/program.h"

namespace kiln {

// Every op node belongs to the group of its group_root (itself when null).
absl::StatusOr<Program> BuildProgram(const Graph& graph);

}  // namespace kiln

#endif  // KILN_COMPILER_LOWER_BUILD_PROGRAM_H_
