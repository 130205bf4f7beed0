// Integer division that rounds down or up, for b > 0 (C++'s `/` rounds toward
// zero): loop trip counts, tiles and blocks covering an extent, bounds of a
// loop variable solved from an affine inequality.
#ifndef KILN_COMMON_INT_MATH_H_
#define KILN_COMMON_INT_MATH_H_

#include <cstdint>

namespace kiln {

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

inline int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

}  // namespace kiln

#endif  // KILN_COMMON_INT_MATH_H_
