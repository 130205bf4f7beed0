// Reading and writing one element of a tensor of any DType on the host, in
// its compute type's terms: floats as double, integers and bools as int64.
// For constant folding, baked scalars and importers; kernels convert in
// generated code instead.
#ifndef KILN_COMPILER_IR_ELEMENT_ACCESS_H_
#define KILN_COMPILER_IR_ELEMENT_ACCESS_H_

#include <cstdint>

#include "compiler/ir/dtype.h"

namespace kiln {

// Element i of `data` as a double (integers converted exactly where they fit).
double ReadElementAsDouble(DType dtype, const void* data, int64_t i);

// Element i of `data` as an int64: integers widened (signed or unsigned per
// type), bools 0/1, floats truncated toward zero.
int64_t ReadElementAsInt(DType dtype, const void* data, int64_t i);

// Stores `v` as element i: floats rounded to nearest even (float16,
// bfloat16, float32), integers converted as C++ does (to int64 first, then
// wrapped), bools as v != 0.
void WriteElementFromDouble(DType dtype, void* data, int64_t i, double v);

// Stores `v` as element i: integers wrapped to the type's width, floats
// converted, bools as v != 0.
void WriteElementFromInt(DType dtype, void* data, int64_t i, int64_t v);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_ELEMENT_ACCESS_H_
