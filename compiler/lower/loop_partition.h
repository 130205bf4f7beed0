// Loop partitioning (TVM's LoopPartition, for the case padding creates).
//
// Padded ops (pooling, pad, convolutions on the generic path) read their
// input as select(0 <= y && y < H, in[clamp(y)], fill): inside a vectorised
// loop the clamped index is not affine, so every element becomes a gather
// or scalar code, though only the first and last few iterations are ever
// out of range. This pass splits each vectorised loop into a head, an
// interior and a tail, where the interior is the range of the loop variable
// over which every such bound provably holds for all values of the other
// loop and reduction variables; there the comparisons become true and the
// clamps disappear, so the reads are affine again. In blocked layouts
// (NCHW16c) the vectorised loop runs over a pixel's channel lanes and the
// bounds depend on the serial pixel loops around it: those are split the
// same way, when they hold only a few such lane loops.
#ifndef KILN_COMPILER_LOWER_LOOP_PARTITION_H_
#define KILN_COMPILER_LOWER_LOOP_PARTITION_H_

#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// `body` with its kVectorized loops, and serial loops around a few lane
// loops, partitioned where that removes bounds.
Stmt PartitionBoundaryLoops(const Stmt& body, te::ExprBuilder& builder);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LOOP_PARTITION_H_
