// Merges nodes that compute the same value: the same op with equal attributes
// on the same inputs, and constants with equal type and bytes.
#ifndef KILN_COMPILER_PASSES_ELIMINATE_COMMON_SUBEXPR_H_
#define KILN_COMPILER_PASSES_ELIMINATE_COMMON_SUBEXPR_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateEliminateCommonSubexprPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_ELIMINATE_COMMON_SUBEXPR_H_
