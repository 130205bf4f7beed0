// The loop-level passes, in order, as default_pipeline.h lists the graph's
// (TVM's CreatePassList, Halide's Lower.cpp): lowering builds each kernel's
// loop nest, these passes rewrite it, and codegen emits what they leave, so
// the IR that --print-ir-after and kiln-bench --dump-kernel show is the IR
// that becomes machine code.
//
// They run under the same PassContext as graph passes: gated by opt_level and
// disabled_pass, seen by the same instruments (per-pass timing, IR dumps).
// Each runs over every kernel of the program, as a TVM pass runs over every
// PrimFunc of an IRModule.
#ifndef KILN_COMPILER_LOWER_LOOP_PIPELINE_H_
#define KILN_COMPILER_LOWER_LOOP_PIPELINE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/pass/pass.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// One kernel's loop nest and the builder its expressions were made by. Passes
// build new expressions there, so equal subexpressions stay one node, which
// codegen's per-node memo relies on to emit each once.
struct LoopKernel {
  LoopFunction* function = nullptr;
  te::ExprBuilder* builder = nullptr;
  // Set by lowering for kernels whose schedule already shaped the loops (the
  // register-tiled contractions): the generic-nest passes leave them alone.
  bool scheduled = false;
};

// The name under which the loop passes nest in timing reports.
inline constexpr char kLoopPipelineName[] = "LowerLoops";

// The names of the pipeline and of each loop pass, for option validation.
std::vector<std::string> LoopPassNames();

// The loop passes `ctx` keeps from running, comma-separated ("" when all run).
// They change a kernel's code but not its canonical form, so the kernel cache
// keys on them too.
std::string SkippedLoopPasses(const PassContext& ctx);

// Runs every loop pass admitted by `ctx` over `kernels`, in order.
absl::Status RunLoopPipeline(std::vector<LoopKernel>& kernels, const PassContext& ctx);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LOOP_PIPELINE_H_
