// Rewrites training-time ops for inference: batch_norm becomes a per-channel
// multiply and add (whose scale and shift FoldConstant then folds when the
// statistics are constants), dropout becomes the identity; and erf's
// argument x / c for a constant c becomes x * (1 / c), as GELU computes it.
#ifndef KILN_COMPILER_PASSES_SIMPLIFY_INFERENCE_H_
#define KILN_COMPILER_PASSES_SIMPLIFY_INFERENCE_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateSimplifyInferencePass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_SIMPLIFY_INFERENCE_H_
