// A conv's input padded for the contraction schedule's in-place read, and
// where that copy is made (design note in conv_padding.cc).
#ifndef KILN_COMPILER_LOWER_CONV_PADDING_H_
#define KILN_COMPILER_LOWER_CONV_PADDING_H_

#include <optional>

#include "compiler/ir/graph.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// The group's conv2d when the contraction schedule can read its input in
// place after padding and it is the group's only anchor; else null.
const Node* InPlaceConv(const GroupContext& g);

// Whether `conv` is 1x1 without padding: its input is read as it is.
bool IsPointwiseWithoutPadding(const Node* conv);

// Adds the padded input buffer to `fn` and points `target` at it, rewrites
// `value` (the group's element) to read it, and returns the stage that fills
// it; `by_rows` tells how that stage is split across threads.
Stmt PadConvInput(GroupContext& g, const Node* conv, LoopFunction& fn, ContractionTarget& target,
                  te::Expr& value, bool& by_rows);

// `main` (the scheduled body) with a depthwise conv's padded input filled
// one channel at a time into a thread-private plane inside the channel loop;
// nothing when that does not apply.
std::optional<Stmt> FillPerChannel(GroupContext& g, const Node* conv, LoopFunction& fn,
                                   const ContractionTarget& target, const Stmt& main);

// `main` with each image's padded input filled just before that image's
// tiles; nothing unless the padded input is read only inside the image loop.
std::optional<Stmt> FillPerImage(GroupContext& g, const Node* conv, LoopFunction& fn,
                                 const ContractionTarget& target, const Stmt& main);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_CONV_PADDING_H_
