// Vectorised loops that read with a small stride, rewritten as explicit
// vector blocks.
//
// A stride-2 max pool reads in[2x - 1], in[2x] and in[2x + 1]. LLVM's loop
// vectoriser loads 2x and 2x + 1 as one interleaved group but cannot put
// 2x - 1 in it (same phase as 2x + 1, one iteration apart), so that column
// became a gather, and the 55-wide rows left a 7-iteration scalar remainder:
// resnet18's pool ran at a third of ONNX Runtime's speed. Written as blocks
// of 16 lanes (ForKind::kVector) with the tail masked, each strided load is
// one contiguous masked load and a shuffle in codegen, and there is no
// scalar remainder.
#ifndef KILN_COMPILER_LOWER_STRIDED_VECTOR_LOOPS_H_
#define KILN_COMPILER_LOWER_STRIDED_VECTOR_LOOPS_H_

#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// Lanes of the blocks (float32 in a 512-bit vector).
inline constexpr int64_t kStridedBlockLanes = 16;

// `body` with each kVectorized loop of at least 16 iterations whose body is
// one store, contiguous along the loop, and that loads with a stride of 2
// to 4 elements along it, rewritten as a serial loop over blocks around a
// kVector loop, the store predicated on the last block's lanes.
Stmt BlockStridedVectorLoops(const Stmt& body, te::ExprBuilder& builder);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_STRIDED_VECTOR_LOOPS_H_
