// What the runtime executes: a model as a sequence of kernel calls over
// numbered values. It names kernels but holds none of their code or loop
// nests (those are the compiler's, in lowered_program.h), so the runtime
// needs nothing of the compiler beyond this header and tensor types.
#ifndef KILN_COMPILER_PROGRAM_H_
#define KILN_COMPILER_PROGRAM_H_

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/tensor_type.h"

namespace kiln {

// A value the program reads or produces. Graph inputs are bound per call;
// constants carry their bytes; intermediates are written by exactly one
// kernel, except a concat made in place, whose slices' kernels write it.
struct ValueSpec {
  enum class Kind { kInput, kConstant, kIntermediate };
  Kind kind = Kind::kIntermediate;
  std::string name;
  TensorType type;
  // kConstant only; CompiledModel::Create copies and then drops it.
  std::shared_ptr<const ConstantData> constant;
  // An intermediate that lives inside another, value `alias_of`, from byte
  // `alias_offset` on: a concat's input written by its kernel straight into
  // its slice (concat_in_place.cc). -1: it has bytes of its own.
  int alias_of = -1;
  int64_t alias_offset = 0;
};

// One call of a compiled kernel.
struct KernelCall {
  // Readable and unique within the program, e.g. "fused_dense_add_relu_1".
  std::string name;
  // The values it reads, then the one it writes: the kernel's parameters in order.
  std::vector<int> args;
  // Its fused ops' declared floating-point operations: how much work it
  // does with what it reads (engine/row_chunks.h weighs weights by it).
  double flops = 0;
  // The bytes its temporaries (padded inputs, packed panels, Winograd
  // planes) take from the kernel workspace pool while it runs.
  int64_t temp_bytes = 0;
};

// Run-time indices to check (index_range.h): `value`'s int64 elements index
// a dim of `size` for node `node` (gather's indices, when the program holds
// them in memory: a model input or a kernel's output).
struct IndexCheck {
  int value = 0;
  int64_t size = 0;
  std::string node;
};

struct Program {
  std::string name;
  std::vector<ValueSpec> values;
  std::vector<int> inputs;   // graph inputs, in the graph's order
  std::vector<int> outputs;  // graph outputs, in order (may be inputs or constants)
  std::vector<std::string> output_names;  // as the graph declared them
  std::vector<KernelCall> kernels;        // in execution order
  std::vector<IndexCheck> index_checks;
};

}  // namespace kiln

#endif  // KILN_COMPILER_PROGRAM_H_
