// Division and modulus in index expressions, simplified by the ranges of
// their variables (after TVM's arith::Analyzer, for the one case that costs).
//
// Inlining a reshape into its consumer leaves indices such as
//     ((m * 256 + k) / 64) % 4        with k < 256
// which is just k / 64. Unsimplified, the vectorised loop that packs an
// operand through such an index divides per lane in 64 bits, which AVX-512
// cannot do in vector registers: a fused transpose + matmul ran slower than
// the copy kernel it replaced. With every variable in [0, extent), an
// i64 numerator n >= 0 splits as n = D * q + r with r >= 0 (q the terms whose
// coefficients D divides), and then
//     n / D = q + r / D        n % D = r % D
// where r / D is 0 and r % D is r when r < D.
#ifndef KILN_COMPILER_LOWER_SIMPLIFY_INDEX_H_
#define KILN_COMPILER_LOWER_SIMPLIFY_INDEX_H_

#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// `e` with its i64 divisions and moduli by positive constants simplified.
// Equal to `e` at every point where each variable lies in [0, extent).
te::Expr SimplifyIndex(te::ExprBuilder& b, const te::Expr& e);

// Every expression of the statements in `s`, simplified.
Stmt SimplifyIndices(te::ExprBuilder& b, const Stmt& s);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_SIMPLIFY_INDEX_H_
