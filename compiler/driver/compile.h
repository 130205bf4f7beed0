// The compiler's entry point: graph in, lowered program out.
#ifndef KILN_COMPILER_DRIVER_COMPILE_H_
#define KILN_COMPILER_DRIVER_COMPILE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/pass/pass.h"
#include "compiler/lower/lowered_program.h"
#include "compiler/lower/schedule_override.h"

namespace kiln {

// The most ops one fused group may hold (CompileOptions::max_fuse_depth).
// Lowering inlines a group's producers recursively, a few stack frames per
// op: a client-chosen depth of ~14 000 overflowed a thread's stack.
inline constexpr int kMaxFuseDepthLimit = 1024;

struct CompileOptions {
  int opt_level = 2;
  std::vector<std::string> disabled_passes;
  std::vector<std::string> required_passes;
  int max_fuse_depth = 256;  // 1..kMaxFuseDepthLimit
  // PassConfig::nchwc_layout: conv chains in blocked channels.
  NchwcLayout nchwc_layout = NchwcLayout::kAuto;
  // PassConfig::operand_load_cycles: 0 plans contractions for this host;
  // another value plans them as for a CPU with that load cost (tests pin it).
  double operand_load_cycles = 0;
  // PassConfig::winograd_tile: 2, 3, 4, or 0 for no Winograd convs.
  int winograd_tile = 2;
  // Pass names after which the graph text is recorded; "all" for every pass.
  std::vector<std::string> print_ir_after;
  // Kernels compiled with bounds checks (codegen::CodegenOptions::bounds_checks),
  // whatever the compile driver's own codegen options say. Lowering ignores it:
  // it travels here so that every compile of a model (its shape variants too)
  // gets it.
  bool kernel_bounds_checks = false;
  // Also told about every pass (compile progress); not owned, may be null.
  PassInstrument* progress = nullptr;
  // Asked between passes, groups and kernels: true stops the compile with
  // Cancelled. Unset: it runs to the end.
  std::function<bool()> should_stop;
  // Measured schedule choices by a group's canonical form (tuning records);
  // asked from lowering threads. Unset: every schedule is the estimate's.
  lower::ScheduleOverrideLookup schedule_overrides;
};

// Runs the default pipeline over `graph` (which must come from an importer, so
// already verified), partitions it into fused groups and lowers each to a loop
// nest. InvalidArgument for graphs that fail type inference or name unknown
// passes.
absl::StatusOr<LoweredProgram> CompileGraph(Graph graph, const CompileOptions& options);

}  // namespace kiln

#endif  // KILN_COMPILER_DRIVER_COMPILE_H_
