// What the importer needs to size ops whose output shape depends on their
// input's values (value_shape_ops.cc holds the ops and the design note).
#ifndef KILN_COMPILER_OPS_VALUE_SHAPE_OPS_H_
#define KILN_COMPILER_OPS_VALUE_SHAPE_OPS_H_

#include <cstdint>
#include <optional>

#include "compiler/ir/graph.h"

namespace kiln {

// How many of `x`'s elements are nonzero (NaN counts): nonzero's `count`.
int64_t CountNonZero(const ConstantData& x);
// How many distinct slices `x` has along `axis` (none: distinct elements):
// unique's `count`.
int64_t CountUnique(const ConstantData& x, std::optional<int64_t> axis);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_VALUE_SHAPE_OPS_H_
