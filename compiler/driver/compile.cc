#include "compiler/driver/compile.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ms_since.h"
#include "common/status_macros.h"
#include "compiler/driver/default_pipeline.h"
#include "compiler/ir/op_def.h"
#include "compiler/pass/ir_printer_instrument.h"
#include "compiler/lower/build_program.h"
#include "compiler/lower/concat_in_place.h"
#include "compiler/lower/loop_pipeline.h"
#include "compiler/pass/timing_instrument.h"

namespace kiln {
namespace {

absl::Status CheckPassNames(const Pass& pipeline, const std::vector<std::string>& names,
                            bool allow_all) {
  std::vector<std::string> known = lower::LoopPassNames();
  known.push_back(kConcatInPlaceName);
  pipeline.CollectNames(known);
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  for (const std::string& n : names) {
    if (allow_all && n == "all") continue;
    if (!std::binary_search(known.begin(), known.end(), n)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown pass '", n, "'; known passes: ",
                                                     absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoweredProgram> CompileGraph(Graph graph, const CompileOptions& options) {
  std::unique_ptr<Sequential> pipeline = DefaultPipeline();
  KILN_RETURN_IF_ERROR(CheckPassNames(*pipeline, options.disabled_passes, false));
  KILN_RETURN_IF_ERROR(CheckPassNames(*pipeline, options.required_passes, false));
  KILN_RETURN_IF_ERROR(CheckPassNames(*pipeline, options.print_ir_after, true));
  if (options.opt_level < 0 || options.opt_level > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("opt_level ", options.opt_level, " is outside 0..3"));
  }
  if (options.max_fuse_depth < 1) {
    return absl::InvalidArgumentError("max_fuse_depth must be at least 1");
  }
  if (options.winograd_tile != 0 && (options.winograd_tile < 2 || options.winograd_tile > 4)) {
    return absl::InvalidArgumentError(
        absl::StrCat("winograd_tile ", options.winograd_tile, " is not 0, 2, 3 or 4"));
  }

  TimingInstrument timing;
  IrPrinterInstrument printer(options.print_ir_after);
  PassContext ctx;
  ctx.opt_level = options.opt_level;
  ctx.disabled_pass = options.disabled_passes;
  ctx.required_pass = options.required_passes;
  ctx.config.fuse_max_depth = options.max_fuse_depth;
  ctx.config.nchwc_layout = options.nchwc_layout;
  ctx.config.operand_load_cycles = options.operand_load_cycles;
  ctx.config.winograd_tile = options.winograd_tile;
  ctx.instruments = {&timing, &printer};
  if (options.progress != nullptr) ctx.instruments.push_back(options.progress);
  ctx.should_stop = options.should_stop;
  ctx.pass_factory = CreatePassByName;

  auto start = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(RunPass(*pipeline, graph, ctx, 0).status());
  const double passes_ms = MsSince(start);
  // InferType and FoldEmpty are opt_level 0 but may be disabled; lowering
  // needs types, and no kernel may see a zero-size tensor (fold_empty.cc).
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->type_known) {
      return absl::FailedPreconditionError(
          absl::StrCat("node '", n->name, "' has no type: InferType must not be disabled"));
    }
    if (!n->is_op()) continue;
    bool reads_empty = false;
    for (const Node* in : n->inputs) reads_empty |= in->type.NumElements() == 0;
    if (n->type.NumElements() == 0 || (reads_empty && n->op->pattern != OpPattern::kCommReduce)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", n->name, "' has a zero-size operand: FoldEmpty must not be disabled"));
    }
  }

  start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(LoweredProgram lowered,
                        BuildProgram(graph, ctx, options.schedule_overrides));
  lowered.record.lower_ms = MsSince(start);
  lowered.record.passes_ms = passes_ms;
  lowered.record.passes = timing.records();
  lowered.record.ir_dumps = printer.dumps();
  return lowered;
}

}  // namespace kiln
