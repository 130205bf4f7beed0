// A 1x1 conv's fused prologue (fuse_prologue.cc) computed once per element
// into a buffer the contraction schedule then reads in place.
#ifndef KILN_COMPILER_LOWER_PROLOGUE_COPY_H_
#define KILN_COMPILER_LOWER_PROLOGUE_COPY_H_

#include "compiler/ir/graph.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// For `conv` (1x1, no padding) whose input is computed inside the group:
// adds a buffer of the input's shape to `fn`, points `target` at it (read
// in place), rewrites `value` and `out_vars` to read it instead of the
// prologue, and returns the stage that fills it. The prologue's ops become
// leaves of the group's expression: `g` no longer inlines its root.
Stmt CopyPrologue(GroupContext& g, const Node* conv, LoopFunction& fn, ContractionTarget& target,
                  std::vector<te::Var>& out_vars, te::Expr& value);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_PROLOGUE_COPY_H_
