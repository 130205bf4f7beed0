// LoopFunction -> llvm::Module. Internal to codegen: includes LLVM headers.
#ifndef KILN_COMPILER_CODEGEN_LLVM_EMITTER_H_
#define KILN_COMPILER_CODEGEN_LLVM_EMITTER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compiler/codegen/codegen.h"
#include "compiler/lower/loop_ir.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// The module holds the entry `void name(ptr args)`, an internal noalias
// implementation it calls, and one internal function per parallel loop body.
// Of `options`, only bounds_checks matters here.
absl::StatusOr<std::unique_ptr<llvm::Module>> EmitModule(const lower::LoopFunction& fn,
                                                         const CodegenOptions& options,
                                                         llvm::LLVMContext& context,
                                                         llvm::TargetMachine& target);

}  // namespace kiln::codegen

#endif  // KILN_COMPILER_CODEGEN_LLVM_EMITTER_H_
