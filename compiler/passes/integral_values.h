// Which float values are known to be integers: shared by the passes that
// recognise fake quantisation (simplify_fake_quant.cc, integer_qdq_conv.cc).
#ifndef KILN_COMPILER_PASSES_INTEGRAL_VALUES_H_
#define KILN_COMPILER_PASSES_INTEGRAL_VALUES_H_

#include "compiler/ir/graph.h"

namespace kiln {

// NaN, infinite or an integer.
bool IsIntegerValue(double v);

// Every element of `n` (a float tensor) is NaN, infinite or an integer, as
// far as a walk of `depth` nodes up its inputs proves.
bool IsIntegral(const Node* n, int depth);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_INTEGRAL_VALUES_H_
