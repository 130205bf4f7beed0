// The inside-out reduction schedule for a generic loop nest's innermost
// loop (design note in row_reduction.cc).
#ifndef KILN_COMPILER_LOWER_ROW_REDUCTION_H_
#define KILN_COMPILER_LOWER_ROW_REDUCTION_H_

#include <vector>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The loops over x = loops.back() storing `value` at `store_index` of
// `buffer`, with the one reduction in `value` that depends on x turned inside
// out (a row of accumulators in a local buffer added to `buffers`, or a short
// strided window unrolled); null when that does not apply.
Stmt RowAccumulated(GroupContext& g, const std::vector<te::Var>& loops, int buffer,
                    const te::Expr& store_index, const te::Expr& value,
                    std::vector<BufferDecl>& buffers);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_ROW_REDUCTION_H_
