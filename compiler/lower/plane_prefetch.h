// Prefetching the next input plane while a plane's output rows run: for
// depthwise convs (from conv_padding's per-channel fill) and for pools, which
// read each input plane once, a few short rows at a time, and so would
// otherwise wait on memory between planes.
#ifndef KILN_COMPILER_LOWER_PLANE_PREFETCH_H_
#define KILN_COMPILER_LOWER_PLANE_PREFETCH_H_

#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// `rows`, `op`'s loop over the output rows of channel `c` of image `n`, with
// prefetches of the input plane the thread reads next spread over its
// iterations; `rows` itself unless `op`'s input is a parameter with large
// planes.
Stmt PrefetchNextPlane(GroupContext& g, const Node* op, const te::Expr& n, const te::Expr& c,
                       const Stmt& rows);

// `nest`, the output's loop nest over `out_vars`, with each output plane's
// rows prefetching the next input plane when the group is one pool.
Stmt PrefetchNextPoolPlane(GroupContext& g, const std::vector<te::Var>& out_vars,
                           const Stmt& nest);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_PLANE_PREFETCH_H_
