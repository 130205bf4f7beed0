#include "runtime/kernel_call.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/kernel_fault.h"
#include "runtime/workspace_pool.h"

namespace kiln::runtime {

absl::StatusOr<KernelCallResult> CallKernel(const LoadedKernel& kernel,
                                            const std::vector<TensorType>& arg_types,
                                            const std::vector<const Tensor*>& inputs) {
  if (arg_types.empty() || inputs.size() != arg_types.size() - 1) {
    return absl::InvalidArgumentError(absl::StrCat("kernel takes ", arg_types.size() - 1,
                                                   " inputs, got ", inputs.size()));
  }
  std::vector<void*> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]->type() != arg_types[i]) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i, " expects ",
                                                     arg_types[i].ToString(), ", got ",
                                                     inputs[i]->type().ToString()));
    }
    args.push_back(const_cast<void*>(inputs[i]->data()));
  }
  absl::StatusOr<Tensor> output = Tensor::Allocate(arg_types.back());
  if (!output.ok()) return output.status();
  args.push_back(output->data());
  abi::KernelFault fault;
  args.push_back(&fault);
  const auto start = std::chrono::steady_clock::now();
  kernel.fn()(args.data());
  if (const int64_t refused = TakeRefusedWorkspaceBytes(); refused > 0) {
    return RefusedTemporariesStatus(kernel.symbol(), refused);
  }
  KernelCallResult result;
  result.run_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  if (fault.faulted.load(std::memory_order_acquire) != 0) {
    std::vector<std::string> names;
    for (size_t i = 0; i < inputs.size(); ++i) names.push_back(absl::StrCat("input ", i));
    names.push_back("output");
    return KernelFaultStatus(fault, kernel.symbol(), names);
  }
  result.output = *std::move(output);
  return result;
}

}  // namespace kiln::runtime
