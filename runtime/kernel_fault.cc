#include "runtime/kernel_fault.h"

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

absl::Status KernelFaultStatus(const abi::KernelFault& fault, absl::string_view kernel,
                               const std::vector<std::string>& param_names) {
  if (fault.faulted.load(std::memory_order_acquire) == 0) return absl::OkStatus();
  const size_t b = static_cast<size_t>(fault.buffer);
  const std::string buffer =
      b < param_names.size()
          ? absl::StrCat("'", param_names[b], "' (parameter ", b, ")")
          : absl::StrCat("temporary ", b - param_names.size(), " (buffer ", b, ")");
  return absl::InternalError(absl::StrCat(
      "bounds check: kernel '", kernel, "' ", fault.is_store ? "stored to" : "loaded from",
      " element ", fault.index, " of ", buffer, ", which has ", fault.num_elements,
      " elements; the access was not made and the kernel stopped"));
}

}  // namespace kiln::runtime

// Runs on whichever thread the kernel's loop body runs on: lock-free, and
// the details are written only by the thread that set `faulted`. The caller
// reads them after the kernel returned (and kiln_parallel_for joined).
extern "C" void kiln_kernel_fault(kiln::abi::KernelFault* fault, int32_t buffer, int64_t index,
                                  int64_t num_elements, int32_t is_store) {
  int32_t expected = 0;
  if (!fault->faulted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  fault->buffer = buffer;
  fault->index = index;
  fault->num_elements = num_elements;
  fault->is_store = is_store;
}
