// Evaluates a quantising chain's float arithmetic in float64. QuantizeLinear
// imports as clip(round(y / y_scale) + zp); when y is computed by float ops
// from dequantised integers, float32 rounds each product and sum, and the
// division, and a value within ~1e-7 of a .5 boundary rounds otherwise than
// the fake-quant definition, which computes in exact arithmetic (float64 in
// the model zoo's reference). The residual adds of a QDQ resnet,
//   clip(round(relu((a - za) * sa + (b - zb) * sb) / y_scale) + zp)
// and its global average pool are such chains. Here y and the division
// are rebuilt in float64 from the same leaves and the rounded result cast
// back to float32, an integer it holds exactly:
//   round(y / s)  ->  cast<f32>(round(y64 / s64))
// Leaves are values float32 holds exactly as the reference has them: float
// constants, float32 graph inputs and integral values (casts of integer
// tensors, rounded values); the ops between them are elementwise
// arithmetic, relu, clip, where (SimplifyFakeQuant's selects), sum and
// reshape. Any other op in y leaves the chain as it is.
#ifndef KILN_COMPILER_PASSES_QUANTIZE_IN_FLOAT64_H_
#define KILN_COMPILER_PASSES_QUANTIZE_IN_FLOAT64_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateQuantizeInFloat64Pass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_QUANTIZE_IN_FLOAT64_H_
