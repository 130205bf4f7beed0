// A lone stride-1 pool whose output rows are as wide as its input rows, run
// over each plane flattened (design note in flat_plane_pool.cc).
#ifndef KILN_COMPILER_LOWER_FLAT_PLANE_POOL_H_
#define KILN_COMPILER_LOWER_FLAT_PLANE_POOL_H_

#include <vector>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The loop nest storing `value` (the group's element at `out_vars`, not yet
// flattened) into buffer `out_buffer`, with each plane's interior one flat
// vector loop; null unless the group is one max or average pool of stride 1
// over a parameter, as wide out as in, with an interior worth it.
Stmt FlatPlanePool(GroupContext& g, const std::vector<te::Var>& out_vars, int out_buffer,
                   const te::Expr& value, std::vector<BufferDecl>& buffers);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_FLAT_PLANE_POOL_H_
