// What a bounds-checked kernel reports (common/kernel_abi.h's KernelFault),
// as an absl::Status, and the runtime's kiln_kernel_fault that records it.
#ifndef KILN_RUNTIME_KERNEL_FAULT_H_
#define KILN_RUNTIME_KERNEL_FAULT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/kernel_abi.h"

namespace kiln::runtime {

// OK when `fault` holds none. Otherwise Internal: a generated kernel tried
// an element outside a buffer, which only a bug in Kiln can cause (the
// runtime checks and kernels clamp every index a model's inputs choose). The
// message names `kernel`, the buffer (`param_names[i]` for parameter i,
// "temporary k" past them), load or store, the index and the buffer's size.
absl::Status KernelFaultStatus(const abi::KernelFault& fault, absl::string_view kernel,
                               const std::vector<std::string>& param_names);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_KERNEL_FAULT_H_
