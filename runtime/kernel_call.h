// Running one cached kernel on caller-supplied tensors (kernels as remote
// functions, TVM's PackedFunc idea over gRPC).
#ifndef KILN_RUNTIME_KERNEL_CALL_H_
#define KILN_RUNTIME_KERNEL_CALL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/jit_engine.h"
#include "runtime/tensor.h"

namespace kiln::runtime {

struct KernelCallResult {
  Tensor output;
  int64_t run_ns = 0;
};

// `arg_types`: the kernel's inputs then its output. InvalidArgument naming the
// argument when an input's count or type differs; Internal when a
// bounds-checked kernel faults (kernel_fault.h).
absl::StatusOr<KernelCallResult> CallKernel(const LoadedKernel& kernel,
                                            const std::vector<TensorType>& arg_types,
                                            const std::vector<const Tensor*>& inputs);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_KERNEL_CALL_H_
