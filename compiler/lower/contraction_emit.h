// Building a contraction's loops from its plan: operand packing stages, the
// register-tiled micro-kernel and the loop order around it (design note in
// contraction_schedule.cc). A straight function of the operands the analysis
// read off the expression and the plan it chose.
#ifndef KILN_COMPILER_LOWER_CONTRACTION_EMIT_H_
#define KILN_COMPILER_LOWER_CONTRACTION_EMIT_H_

#include <cstdint>
#include <vector>

#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

// A contraction's expression read as a GEMM, with the plan's layout applied:
//     out[o] = epilogue(reduce),  reduce = sum_k fa(o, k) * fb(o, k)
// where fa varies along m_vars, fb along n_vars, both along k_vars, and the
// rest of the output along batch_vars.
struct ContractionOperands {
  // The target's value, output index and store predicate (channel lanes
  // narrow them to the output's own columns).
  te::Expr value, out_index, store_predicate;
  te::Expr reduce, fa, fb;
  std::vector<te::Var> m_vars, n_vars, k_vars, batch_vars;
};

// The schedule `plan` describes for `operands` (its operand access chosen);
// `knobs` as the plan was made with.
ContractionSchedule EmitContraction(const ContractionTarget& target,
                                    const ContractionOperands& operands,
                                    const ContractionPlan& plan,
                                    const ContractionKnobs& knobs = {});

// Index arithmetic the analysis shares with emission.
// The product of the variables' extents.
int64_t Product(const std::vector<te::Var>& vars);
// `flat` split into one index per variable of `vars`, row-major. The
// outermost takes the quotient without a modulus, so the split flattens
// back to `flat` exactly (see linear_form.h).
std::vector<te::Expr> SplitIndex(te::ExprBuilder& b, const te::Expr& flat,
                                 const std::vector<te::Var>& vars);
// Whether `index` steps by one element as `vars`, flattened, step by one
// (a probe over `extent` values stands for the flat position).
bool StepsByOne(te::ExprBuilder& b, const te::Expr& index, const std::vector<te::Var>& vars,
                int64_t extent);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_CONTRACTION_EMIT_H_
