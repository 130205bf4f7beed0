// Removes the integer round trip of fake quantisation. QuantizeLinear followed
// by DequantizeLinear imports as clip(round(x / s) + zp, lo, hi), cast to an
// integer type, cast back to float: the casts change no value the clip lets
// through, so the float reader reads the clip directly (NaN, which the casts
// turn into 0, is mapped to 0 by a select). The integer tensor then vanishes
// from kernels' boundaries and conv and matmul keep their float schedules.
//   cast<f32>(cast<u8>(clip(v, 0, 255)))  ->  where(c == c, c, 0), c = clip(v,
//   0, 255)
// Applies when v is integral (round, floor, integer constants, sums of them,
// ...), [lo, hi] fits every integer type of the chain and the float type holds
// every integer of [lo, hi] exactly.
#ifndef KILN_COMPILER_PASSES_SIMPLIFY_FAKE_QUANT_H_
#define KILN_COMPILER_PASSES_SIMPLIFY_FAKE_QUANT_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateSimplifyFakeQuantPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_SIMPLIFY_FAKE_QUANT_H_
