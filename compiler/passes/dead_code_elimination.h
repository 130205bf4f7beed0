// Drops op and constant nodes no output depends on.
#ifndef KILN_COMPILER_PASSES_DEAD_CODE_ELIMINATION_H_
#define KILN_COMPILER_PASSES_DEAD_CODE_ELIMINATION_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateDeadCodeEliminationPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_DEAD_CODE_ELIMINATION_H_
