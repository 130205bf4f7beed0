// Loop nest -> native object code for the host CPU, through LLVM.
// This header names no LLVM type: callers get bytes, not modules.
#ifndef KILN_COMPILER_CODEGEN_CODEGEN_H_
#define KILN_COMPILER_CODEGEN_CODEGEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/lower/loop_ir.h"

namespace kiln::codegen {

struct HostTarget {
  std::string triple;
  std::string cpu;
  // Enabled features, "+avx512f" style, sorted.
  std::vector<std::string> features;
};

// The machine this process runs on (computed once).
const HostTarget& GetHostTarget();

// "16.0.6".
std::string LlvmVersionString();

struct CodegenOptions {
  int opt_level = 3;  // 0..3, LLVM's -O level
  // Every load and store checks its index against its buffer; one outside is
  // not made, and the kernel reports it and returns (bounds_check.h,
  // common/kernel_abi.h). A debugging aid: LLVM's loop vectoriser leaves loops
  // that may exit early scalar, so checked kernels run slower.
  // Off, the emitted IR is exactly what it is without this option.
  bool bounds_checks = false;
  // Everything here changes the machine code, so it is part of the cache key.
  std::string ToString() const;
};

// Emits `fn` as LLVM IR, optimises it for the host (new pass manager) and
// returns a relocatable object file defining `extern "C" void fn.name(void**)`.
// Thread-safe: each call uses its own LLVMContext and TargetMachine.
absl::StatusOr<std::string> CompileToObject(const lower::LoopFunction& fn,
                                            const CodegenOptions& options);

// The optimised LLVM IR as text, for IR dumps and debugging.
absl::StatusOr<std::string> EmitOptimizedIR(const lower::LoopFunction& fn,
                                            const CodegenOptions& options);

}  // namespace kiln::codegen

#endif  // KILN_COMPILER_CODEGEN_CODEGEN_H_
