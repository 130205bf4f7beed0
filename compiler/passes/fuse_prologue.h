// Fuses an elementwise producer into the conv or matmul that alone reads it,
// as a prologue of that contraction's kernel (see fuse_prologue.cc).
#ifndef KILN_COMPILER_PASSES_FUSE_PROLOGUE_H_
#define KILN_COMPILER_PASSES_FUSE_PROLOGUE_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

// Runs after FuseOps, on its groups (Node::group_root).
std::unique_ptr<Pass> CreateFuseProloguePass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FUSE_PROLOGUE_H_
