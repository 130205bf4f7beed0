#include "compiler/default_pipeline.h"

#include <vector>

#include "compiler/passes/fold_constant.h"
#include "compiler/passes/fuse_ops.h"
#include "compiler/passes/infer_type.h"

namespace kiln {

std::unique_ptr<Sequential> DefaultPipeline() {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(CreateInferTypePass());
  passes.push_back(CreateFoldConstantPass());
  passes.push_back(CreateInferTypePass());  // folded constants are typed; re-check the rest
  passes.push_back(CreateFuseOpsPass());    // last: groups are what lowering compiles
  return std::make_unique<Sequential>("default", std::move(passes));
}

}  // namespace kiln
