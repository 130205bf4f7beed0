// A conv2d_nchwc (blocked channels, ConvertLayoutNchwc's) prepared for the
// contraction schedule: its input padded in the blocked layout, so the
// schedule broadcasts each pixel's channel block in place (design note in
// blocked_conv.cc).
#ifndef KILN_COMPILER_LOWER_BLOCKED_CONV_H_
#define KILN_COMPILER_LOWER_BLOCKED_CONV_H_

#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The group's conv2d_nchwc when it is the group's only anchor and its
// output is the group's shape; else null.
const Node* BlockedConv(const GroupContext& g);

// For a padded `conv`: adds a zero-padded copy of its input to `fn`, rewrites
// `value` (the group's element) to read it over fresh output variables, which
// replace `out_vars`, and returns the stage that fills it. A null Stmt, and
// nothing changed, without padding.
Stmt PadBlockedConvInput(GroupContext& g, const Node* conv, LoopFunction& fn,
                         std::vector<te::Var>& out_vars, te::Expr& value);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_BLOCKED_CONV_H_
