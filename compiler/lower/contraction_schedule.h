// The register-tiled, packed schedule for contractions: dense, matmul, batched
// matmul and conv2d (see contraction_schedule.cc for the design).
#ifndef KILN_COMPILER_LOWER_CONTRACTION_SCHEDULE_H_
#define KILN_COMPILER_LOWER_CONTRACTION_SCHEDULE_H_

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/lower/schedule_override.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

struct ContractionTarget {
  te::ExprBuilder* builder = nullptr;
  // Every output dimension's variable (unit ones included) and the flat
  // output index over them.
  std::vector<te::Var> out_vars;
  te::Expr out_index;
  // The output element, flattened (loads carry one flat index).
  te::Expr value;
  int out_buffer = -1;
  // The function's buffers; the schedule appends its temporaries and may
  // resize a constant parameter it packs.
  std::vector<BufferDecl>* buffers = nullptr;
  // Where the output may be stored (over out_vars), or null for everywhere:
  // a computation domain wider than the output (conv's padded rows) masks
  // the extra columns.
  te::Expr store_predicate;
  // The conv input that the B operand may be read from in place, one row of
  // pixels per reduction step, without packing (-1: none). It is either a
  // zero-padded copy lowering made, or, for a 1x1 conv without padding (any
  // stride), the input itself.
  int conv_input = -1;
  // Whether conv_input has at least 64 + 16 readable elements past the last
  // one the expression addresses, so even a tile that hangs over the edge
  // may read it in place (the padded copy has; the input itself has not).
  bool conv_input_has_slack = false;
  // Whether the output's channels are blocked (conv2d_nchwc, blocked_conv.cc):
  // its innermost dim is a block of kLanes channels and an outer one, which
  // only the weights index, numbers the blocks. N is then both, so a tile
  // spans several blocks, each of its vectors one block stored whole.
  bool channel_blocks = false;
  // The bytes behind a parameter buffer when it is a constant, else null.
  std::function<const ConstantData*(int buffer)> constant_of;
  // A measured choice replacing the estimate's (a tuning record), or null.
  const ScheduleOverride* schedule_override = nullptr;
  // The schedule's knobs; null: the host's (HostContractionKnobs).
  const ContractionKnobs* knobs = nullptr;
};

struct ContractionSchedule {
  Stmt body;
  // Parameters whose constant is replaced by its packed layout, computed now.
  std::vector<std::pair<int, std::shared_ptr<const ConstantData>>> packed_constants;
  // "gemm MRxNR M=.. N=.. K=..", for IR dumps and tests.
  std::string summary;
  // Whether each output row is tiled on its own (the design note's row tiles).
  bool row_tiles = false;
  // The numbers the plan was chosen from (a tuner enumerates plans over them).
  ContractionShape shape;
  // The target's override when the plan follows it ("" otherwise), and why
  // it was ignored when it did not fit the shape.
  std::string override_applied;
  std::string override_ignored;
};

// The schedule, or nullopt when the value is not one float32 sum-of-products
// contraction worth tiling (the generic loop nest then applies).
std::optional<ContractionSchedule> ScheduleContraction(const ContractionTarget& target);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_CONTRACTION_SCHEDULE_H_
