// What the compiler hands the runtime: a model as a sequence of kernel calls over
// numbered values, each kernel a lowered loop function ready for codegen.
#ifndef KILN_COMPILER_PROGRAM_H_
#define KILN_COMPILER_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/tensor_type.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/pass_report.h"

namespace kiln {

// A value the program reads or produces. Graph inputs are bound per call;
// constants carry their bytes; intermediates are written by exactly one kernel.
struct ValueSpec {
  enum class Kind { kInput, kConstant, kIntermediate };
  Kind kind = Kind::kIntermediate;
  std::string name;
  TensorType type;
  std::shared_ptr<const ConstantData> constant;  // kConstant only
};

// One fused group, lowered.
struct KernelSpec {
  // Readable and unique within the program, e.g. "fused_dense_add_relu_1".
  std::string name;
  // The ops it computes in execution order, and the graph nodes it covers.
  std::vector<std::string> ops;
  std::vector<std::string> nodes;
  // The group's canonical structural form: ops, typed attributes, types, topology
  // and the values of constants baked into the code; never names. Equal forms
  // compute the same function, so this is the cache's equality check.
  std::string canonical;
  // Stable 64-bit hash of `canonical` (the same in every process).
  uint64_t structural_hash = 0;
  // The loop nest; its params are `args` in order (inputs, then the output).
  lower::LoopFunction function;
  // The loop passes the compile's options disabled, comma-separated; empty
  // normally. They change the code, not `canonical`, so the cache keys on them.
  std::string skipped_loop_passes;
  // The special schedule lowering chose ("gemm 8x48 M=.. N=.. K=.."), or empty
  // for the generic loop nest.
  std::string schedule;
  std::vector<int> args;
  // The types of `args` (inputs, then the output): what a remote call must pass.
  std::vector<TensorType> arg_types;
};

struct Program {
  std::string name;
  std::vector<ValueSpec> values;
  std::vector<int> inputs;   // graph inputs, in the graph's order
  std::vector<int> outputs;  // graph outputs, in order (may be inputs or constants)
  std::vector<std::string> output_names;  // as the graph declared them
  std::vector<KernelSpec> kernels;  // in execution order
  CompileRecord record;             // what the passes did and cost
};

}  // namespace kiln

#endif  // KILN_COMPILER_PROGRAM_H_
