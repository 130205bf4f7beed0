// The requantisation the integer product ops (qconv2d_u8s8, qmatmul_u8s8)
// state in their compute when they store uint8 (runtime/requantize_u8.h is
// the kernels' side): in float64,
//   t = clamp(sum * scale + bias, low, high)
//   q = clamp(round_half_even(t / y_scale) + zero, q_low, q_high)
// with the six values of the op's `requant` operand (abi::kRequantValues).
#ifndef KILN_COMPILER_OPS_REQUANTIZE_EXPR_H_
#define KILN_COMPILER_OPS_REQUANTIZE_EXPR_H_

#include "compiler/te/compute_context.h"

namespace kiln {

// q as an int64 in [q_low, q_high]; `sum` int64, `scale` and `bias` float64,
// `requant` the operand's index.
te::Expr RequantizeExpr(te::ComputeContext& ctx, te::Expr sum, te::Expr scale, te::Expr bias,
                        int requant);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_REQUANTIZE_EXPR_H_
