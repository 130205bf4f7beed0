// The row-by-row schedule of a generic group whose hoisted reductions are all
// values of an output row (design note in row_stages.cc).
#ifndef KILN_COMPILER_LOWER_ROW_STAGES_H_
#define KILN_COMPILER_LOWER_ROW_STAGES_H_

#include <vector>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The group's whole body when every temporary in `temps` (stored in buffers
// `first_temp`, ...) depends on the same leading output loops of `out_vars`
// (the rows) and reads its rows in order, and `value`, the output element
// stored in `out_buffer`, holds no reduction: one nest over the rows
// computing each row's temporaries, then its outputs. Null when that does
// not apply.
Stmt RowStages(GroupContext& g, const std::vector<te::Var>& out_vars, int out_buffer,
               const std::vector<HoistedTemp>& temps, int first_temp, const te::Expr& value,
               std::vector<BufferDecl>& buffers);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_ROW_STAGES_H_
