// How a narrow element type looks in memory and how a kernel widens it to its
// compute type on load and narrows it back on store (compiler/ir/dtype.h):
// float16 through F16C's vcvtph2ps/vcvtps2ph (LLVM's half), bfloat16 as the
// top half of a float's bits, integers sign- or zero-extended to int64 and
// truncated back (two's complement wrapping, as NumPy and ONNX Runtime do).
// Scalars and vectors alike.
#ifndef KILN_COMPILER_CODEGEN_ELEMENT_CONVERSION_H_
#define KILN_COMPILER_CODEGEN_ELEMENT_CONVERSION_H_

#include "compiler/ir/dtype.h"
#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen {

// The LLVM element type `dtype` is stored as (bfloat16 as i16 bits).
llvm::Type* StorageElementType(llvm::LLVMContext& ctx, DType dtype);

// A loaded value (of StorageElementType, or a vector of it) in the compute
// type: float for float16/bfloat16, i64 for integers, i1 for bool.
llvm::Value* WidenFromStorage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* stored);

// A compute-type value ready to store as `dtype`: floats rounded to nearest
// even, integers truncated, bools as 0/1 bytes.
llvm::Value* NarrowToStorage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* value);

// `value` (float) rounded to the nearest bfloat16, as bits in an i16 (or a
// vector of them): round to nearest even, NaN kept NaN (quieted).
llvm::Value* FloatToBFloat16Bits(llvm::IRBuilderBase& b, llvm::Value* value);

}  // namespace kiln::codegen

#endif  // KILN_COMPILER_CODEGEN_ELEMENT_CONVERSION_H_
