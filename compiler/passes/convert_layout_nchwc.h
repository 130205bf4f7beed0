// Rewrites conv2d chains into blocked channels (NCHW16c): conv2d_nchwc with
// weights packed at compile time, elementwise ops and pools kept blocked,
// layout_transform only at the region's boundaries (design note in the .cc).
// Runs as PassConfig::nchwc_layout says.
#ifndef KILN_COMPILER_PASSES_CONVERT_LAYOUT_NCHWC_H_
#define KILN_COMPILER_PASSES_CONVERT_LAYOUT_NCHWC_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateConvertLayoutNchwcPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_CONVERT_LAYOUT_NCHWC_H_
