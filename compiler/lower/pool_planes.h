// A lone max or average pool lowered plane by plane in flat passes (design
// note in pool_planes.cc).
#ifndef KILN_COMPILER_LOWER_POOL_PLANES_H_
#define KILN_COMPILER_LOWER_POOL_PLANES_H_

#include <vector>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The loop nest storing `value` (the group's element at `out_vars`, not yet
// flattened) into buffer `out_buffer`: a max pool as a pass over the window's
// rows into a stack plane added to `buffers`, then one over its columns (a
// blocked one of horizontal stride 1 row by row, through a band of one row);
// a stride-1 average pool that keeps the row width with each plane's interior
// one flat loop. Null unless the group is that one pool over a parameter.
Stmt PoolOverPlanes(GroupContext& g, const std::vector<te::Var>& out_vars, int out_buffer,
                    const te::Expr& value, std::vector<BufferDecl>& buffers);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_POOL_PLANES_H_
