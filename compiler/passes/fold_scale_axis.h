// Folds a per-output-channel multiply (and then add) by constants that follows
// conv2d or dense into the op's own constant weights and bias, as TVM's
// FoldScaleAxis does for the scale; the shift becomes (part of) the bias.
//   conv2d(x, W, b) * s[o] + t[o]  ->  conv2d(x, W * s[o], b * s[o] + t[o])
#ifndef KILN_COMPILER_PASSES_FOLD_SCALE_AXIS_H_
#define KILN_COMPILER_PASSES_FOLD_SCALE_AXIS_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFoldScaleAxisPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FOLD_SCALE_AXIS_H_
