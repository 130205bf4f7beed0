#include "compiler/passes/dead_code_elimination.h"

namespace kiln {

std::unique_ptr<Pass> CreateDeadCodeEliminationPass() {
  return std::make_unique<FunctionPass>(
      PassInfo{"DeadCodeElimination", 1, {}},
      [](Graph& graph, const PassContext&) -> absl::StatusOr<bool> {
        return graph.RemoveDeadNodes() > 0;
      });
}

}  // namespace kiln
