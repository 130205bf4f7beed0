// Element indices regrouped by loop depth, so that LLVM can hoist what outer
// loops alone change.
//
// Flattening writes an index in Horner form, ((c * H + y) * W + x). When a
// dimension's index mixes an outer and an inner loop (a strided conv's phase
// row oh + kh / 2, with oh from a tile row and kh from the reduction), the
// product by W sits above both and LLVM, which does not distribute a multiply
// over an add, recomputed the whole chain in the innermost loop: a 6-row
// register tile spent eight integer ops per broadcast, and resnet18's stride-2
// 3x3 convs ran at half the speed of its stride-1 ones. Rewritten as
// constant + sum(coefficient * atom), with the terms added from the outermost
// loop's to the innermost's, each partial sum is invariant in every loop
// deeper than its last term and LICM hoists it: the innermost loop adds once.
#ifndef KILN_COMPILER_LOWER_REASSOCIATE_INDEX_H_
#define KILN_COMPILER_LOWER_REASSOCIATE_INDEX_H_

#include "compiler/lower/loop_ir.h"

namespace kiln::lower {

// `s` with the index of every Load and Store regrouped by the depth of the
// loops its terms vary with. Variables of unrolled loops count as constants
// (codegen binds each copy to one). Equal to `s` at every point.
Stmt ReassociateIndices(const Stmt& s);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_REASSOCIATE_INDEX_H_
