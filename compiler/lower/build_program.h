// Partitions a typed (and possibly fused) graph into kernels, lowers each
// fused group to a loop nest and runs the loop passes over them: the step
// from graph IR to the runtime's program.
#ifndef KILN_COMPILER_LOWER_BUILD_PROGRAM_H_
#define KILN_COMPILER_LOWER_BUILD_PROGRAM_H_

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/pass/pass.h"
#include "compiler/lower/lowered_program.h"
#include "compiler/lower/schedule_override.h"

namespace kiln {

// Every op node belongs to the group of its group_root (itself when null).
// The loop passes (loop_pipeline.h) run over the kernels under `ctx`.
// `overrides` (called from lowering threads: it must be thread-safe) gives
// contraction schedules their measured choices.
absl::StatusOr<LoweredProgram> BuildProgram(const Graph& graph, const PassContext& ctx,
                                            const lower::ScheduleOverrideLookup& overrides = {});

}  // namespace kiln

#endif  // KILN_COMPILER_LOWER_BUILD_PROGRAM_H_
