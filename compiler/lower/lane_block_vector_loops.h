// Vectorised loops whose loads divide the loop's index by the lane count,
// rewritten as explicit blocks of 16 lanes.
//
// Reading blocked channels (NCHW16c) from a channels-last loop, as the copy
// from a blocked conv's output into the NHWC a LayerNorm reads does, indexes
//     in[(c / 16) * plane + pixel * 16 + c % 16]        for c in [0, C)
// which no single stride describes along c, so LLVM's vectoriser gathered
// every lane: convnext_tiny's copies ran at 15-17 GB/s. Along blocks of 16
// lanes (c = 16 * cb + v) the same index is cb * plane + pixel * 16 + v,
// contiguous in v: one vector load per block.
#ifndef KILN_COMPILER_LOWER_LANE_BLOCK_VECTOR_LOOPS_H_
#define KILN_COMPILER_LOWER_LANE_BLOCK_VECTOR_LOOPS_H_

#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// `body` with each kVectorized loop whose extent is a multiple of 16 and
// whose body is one store, contiguous along the loop, rewritten as a serial
// loop over blocks around a kVector loop of 16 lanes when some load varies
// irregularly along the loop and every load is contiguous or constant along
// the lanes once the index is split.
Stmt BlockLaneDividedVectorLoops(const Stmt& body, te::ExprBuilder& builder);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LANE_BLOCK_VECTOR_LOOPS_H_
