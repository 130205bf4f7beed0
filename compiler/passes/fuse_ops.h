// Groups ops into fused kernels the way TVM's FuseOps does (see fuse_ops.cc),
// recording each op's group root in Node::group_root.
#ifndef KILN_COMPILER_PASSES_FUSE_OPS_H_
#define KILN_COMPILER_PASSES_FUSE_OPS_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFuseOpsPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FUSE_OPS_H_
