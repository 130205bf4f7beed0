// A conv2d_nchwc (blocked channels, ConvertLayoutNchwc's) prepared for the
// contraction schedule: its input padded in the blocked layout, so the
// schedule broadcasts each pixel's channel block in place (design note in
// blocked_conv.cc).
#ifndef KILN_COMPILER_LOWER_BLOCKED_CONV_H_
#define KILN_COMPILER_LOWER_BLOCKED_CONV_H_

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The group's one node of `op` when no other member is a reduction or
// opaque and its output is the group's shape (so the group is that op and
// its elementwise epilogue); else null.
const Node* LoneAnchor(const GroupContext& g, const std::string& op);

// LoneAnchor for conv2d_nchwc.
const Node* BlockedConv(const GroupContext& g);

// The stage that fills `buffer`, of blocked `shape` (N, C/c, Hp, Wp, c), with
// `input` (N, C/c, H, W, c) at row `top` and column `left` and zeros around
// it (and `input`'s producers in the group applied once per element).
Stmt ZeroPaddedCopy(GroupContext& g, const Node* input, int buffer,
                    const std::vector<int64_t>& shape, int64_t top, int64_t left);

// For a padded `conv`: adds a zero-padded copy of its input to `fn`, rewrites
// `value` (the group's element) to read it over fresh output variables, which
// replace `out_vars`, and returns the stage that fills it. A null Stmt, and
// nothing changed, without padding.
Stmt PadBlockedConvInput(GroupContext& g, const Node* conv, LoopFunction& fn,
                         std::vector<te::Var>& out_vars, te::Expr& value);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_BLOCKED_CONV_H_
