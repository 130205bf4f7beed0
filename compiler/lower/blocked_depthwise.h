// A conv2d_nchwc_depthwise or conv2d_nchwc_grouped (blocked channels,
// ConvertLayoutNchwc's) as register tiles of output pixels, each pixel's 16
// channels one vector (design note in blocked_depthwise.cc).
#ifndef KILN_COMPILER_LOWER_BLOCKED_DEPTHWISE_H_
#define KILN_COMPILER_LOWER_BLOCKED_DEPTHWISE_H_

#include <string>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"

namespace kiln::lower {

// The body of `fn` (its params declared, the output last) when the group is
// one conv2d_nchwc_depthwise or conv2d_nchwc_grouped with elementwise
// consumers producing its shape; adds the buffers it needs to `fn` and says
// what it did in `summary`. Null otherwise, `fn` unchanged.
Stmt LowerBlockedDepthwise(GroupContext& g, LoopFunction& fn, std::string& summary);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_BLOCKED_DEPTHWISE_H_
