#include "compiler/driver/default_pipeline.h"

#include <vector>

#include "compiler/passes/convert_layout_nchwc.h"
#include "compiler/passes/dead_code_elimination.h"
#include "compiler/passes/eliminate_common_subexpr.h"
#include "compiler/passes/fold_constant.h"
#include "compiler/passes/fold_empty.h"
#include "compiler/passes/fold_scale_axis.h"
#include "compiler/passes/fuse_attention.h"
#include "compiler/passes/fuse_ops.h"
#include "compiler/passes/fuse_prologue.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/integer_qdq_conv.h"
#include "compiler/passes/integer_qdq_matmul.h"
#include "compiler/passes/quantize_in_float64.h"
#include "compiler/passes/requantize_in_kernel.h"
#include "compiler/passes/simplify_fake_quant.h"
#include "compiler/passes/simplify_inference.h"
#include "compiler/passes/winograd_conv.h"

namespace kiln {

std::unique_ptr<Sequential> DefaultPipeline() {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(CreateInferTypePass());
  passes.push_back(CreateFoldEmptyPass());               // no kernel ever sees a zero-size tensor
  passes.push_back(CreateSimplifyInferencePass());       // batch_norm -> scale/shift, before folding
  passes.push_back(CreateFoldConstantPass());            // folds the scale/shift arithmetic too
  passes.push_back(CreateSimplifyFakeQuantPass());       // zero points folded to constants first
  passes.push_back(CreateIntegerQdqConvPass());          // reads SimplifyFakeQuant's selects
  passes.push_back(CreateIntegerQdqMatMulPass());        // the same, for matmul and dense
  passes.push_back(CreateRequantizeInKernelPass());      // after both: reads their products
  passes.push_back(CreateQuantizeInFloat64Pass());       // the chains left: residual adds, pools
  passes.push_back(CreateFoldScaleAxisPass());           // needs folded per-channel constants
  passes.push_back(CreateEliminateCommonSubexprPass());  // after folding: equal constants look equal
  passes.push_back(CreateFuseAttentionPass());           // needs the head split's slices folded
  passes.push_back(CreateConvertLayoutNchwcPass());      // after folding BN into the convs
  passes.push_back(CreateWinogradConvPass());            // on its blocked convs
  passes.push_back(CreateDeadCodeEliminationPass());
  passes.push_back(CreateFuseOpsPass());                 // groups are what lowering compiles
  passes.push_back(CreateFuseProloguePass());            // on FuseOps' groups: epilogues first
  return std::make_unique<Sequential>("default", std::move(passes));
}

std::unique_ptr<Pass> CreatePassByName(const std::string& name) {
  if (name == "InferType") return CreateInferTypePass();
  if (name == "SimplifyInference") return CreateSimplifyInferencePass();
  if (name == "FoldConstant") return CreateFoldConstantPass();
  if (name == "FoldEmpty") return CreateFoldEmptyPass();
  if (name == "SimplifyFakeQuant") return CreateSimplifyFakeQuantPass();
  if (name == "IntegerQdqConv") return CreateIntegerQdqConvPass();
  if (name == "IntegerQdqMatMul") return CreateIntegerQdqMatMulPass();
  if (name == "RequantizeInKernel") return CreateRequantizeInKernelPass();
  if (name == "QuantizeInFloat64") return CreateQuantizeInFloat64Pass();
  if (name == "FoldScaleAxis") return CreateFoldScaleAxisPass();
  if (name == "EliminateCommonSubexpr") return CreateEliminateCommonSubexprPass();
  if (name == "FuseAttention") return CreateFuseAttentionPass();
  if (name == "ConvertLayoutNchwc") return CreateConvertLayoutNchwcPass();
  if (name == "WinogradConv") return CreateWinogradConvPass();
  if (name == "DeadCodeElimination") return CreateDeadCodeEliminationPass();
  if (name == "FuseOps") return CreateFuseOpsPass();
  if (name == "FusePrologue") return CreateFuseProloguePass();
  return nullptr;
}

}  // namespace kiln
