// Bounds-checked codegen (CodegenOptions::bounds_checks): the test before
// each load and store of a generated kernel.
//
// JIT-compiled kernels are invisible to ASan and Valgrind, and an index a
// compiler bug puts past a buffer reads a neighbour's bytes or corrupts the
// heap far from its cause. With checks on, every access's flat element index
// (each active lane's, for vector accesses) is compared, unsigned so that a
// negative one fails too, against its buffer's element count; a failing
// access is not made: the kernel reports it (common/kernel_abi.h) and returns.
#ifndef KILN_COMPILER_CODEGEN_BOUNDS_CHECK_H_
#define KILN_COMPILER_CODEGEN_BOUNDS_CHECK_H_

#include <cstdint>

#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen {

struct BoundsCheck {
  int buffer = 0;             // the LoopFunction's buffer number, reported
  int64_t num_elements = 0;   // the buffer's
  llvm::Value* index = nullptr;  // i64, or <N x i64> for a vector access
  llvm::Value* mask = nullptr;   // <N x i1>: the lanes that access; null for all
  bool is_store = false;
};

// Branches to a new block that calls kiln_kernel_fault(fault, buffer, index,
// num_elements, is_store) for the first failing lane and then jumps to
// `exit`, and leaves `b` at the start of the block where every index is in
// range (which dominates all that follows, so values computed before stay
// usable).
void EmitBoundsCheck(llvm::IRBuilder<>& b, const BoundsCheck& check, llvm::Value* fault,
                     llvm::BasicBlock* exit);

}  // namespace kiln::codegen

#endif  // KILN_COMPILER_CODEGEN_BOUNDS_CHECK_H_
