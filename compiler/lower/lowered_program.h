// What the compiler hands the engine: the program the runtime will run, and
// for each kernel it calls, the lowered loop nest codegen compiles and what
// the kernel cache keys it by.
#ifndef KILN_COMPILER_LOWER_LOWERED_PROGRAM_H_
#define KILN_COMPILER_LOWER_LOWERED_PROGRAM_H_

#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/tensor_type.h"
#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/pass/pass_report.h"
#include "compiler/program.h"

namespace kiln {

// One fused group, lowered.
struct KernelSpec {
  // The name of its call in the program; also the symbol `function` defines.
  std::string name;
  // The ops it computes in execution order, and the graph nodes it covers.
  std::vector<std::string> ops;
  std::vector<std::string> nodes;
  // The group's canonical structural form: ops, typed attributes, types, topology
  // and the values of constants baked into the code; never names. Equal forms
  // compute the same function, so this is the cache's equality check.
  std::string canonical;
  // The loop passes the compile's options disabled, comma-separated; empty
  // normally. They change the code, not `canonical`, so the cache keys on them.
  std::string skipped_loop_passes;
  // The contraction knobs where the compile's options set them apart from
  // the host's ("loads 1"), else empty; the cache keys on it as well.
  std::string knobs;
  // The loop nest; its params are the call's args in order (inputs, then the output).
  lower::LoopFunction function;
  // The special schedule lowering chose ("gemm 8x48 M=.. N=.. K=.."), or empty
  // for the generic loop nest.
  std::string schedule;
  // The contraction schedule's shape, where it applied: what a tuner plans over.
  std::optional<lower::ContractionShape> contraction;
  // The measured override (a tuning record) the schedule followed, as
  // ScheduleOverride::ToString, or empty. It changes the code, not
  // `canonical`, so the cache keys on it; and why a record was ignored.
  std::string tuned;
  std::string override_ignored;
  // The types of its parameters (inputs, then the output): what a remote call
  // must pass.
  std::vector<TensorType> arg_types;
  // The roofline's two counts: FLOPs of one call (the fused ops' declared costs,
  // op_cost.h) and the bytes of its args, each read or written once -- a lower
  // bound on memory traffic that ignores re-reads a schedule's tiling adds.
  double flops = 0;
  int64_t bytes = 0;
};

struct LoweredProgram {
  Program program;
  std::vector<KernelSpec> kernels;  // kernels[i] implements program.kernels[i]
  CompileRecord record;             // what the passes did and cost
};

}  // namespace kiln

#endif  // KILN_COMPILER_LOWER_LOWERED_PROGRAM_H_
