// What one op node costs in arithmetic: the FLOP count a kernel's roofline
// (GFLOPS, fraction of the FMA peak) divides by its time.
#ifndef KILN_COMPILER_IR_OP_COST_H_
#define KILN_COMPILER_IR_OP_COST_H_

#include "compiler/ir/graph.h"

namespace kiln {

// The node's FLOPs: its OpDef's `flops` when declared, else one per output
// element (elementwise, broadcast, pools, softmax: an estimate), one per
// input element for reductions, none for injective ops (reshape, transpose,
// gather move data and do no arithmetic). Zero for inputs and constants.
double OpFlops(const Node& node);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_OP_COST_H_
