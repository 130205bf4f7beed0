#include "compiler/codegen/bounds_check.h"

#include "common/kernel_abi.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen {
namespace {

llvm::FunctionCallee FaultHandler(llvm::Module& m, llvm::IRBuilder<>& b) {
  llvm::FunctionCallee f = m.getOrInsertFunction(
      abi::kKernelFault,
      llvm::FunctionType::get(b.getVoidTy(),
                              {b.getPtrTy(), b.getInt32Ty(), b.getInt64Ty(), b.getInt64Ty(),
                               b.getInt32Ty()},
                              false));
  // Cold: block placement keeps the fault paths out of the loops' way.
  if (auto* decl = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
    decl->addFnAttr(llvm::Attribute::Cold);
    decl->addFnAttr(llvm::Attribute::NoUnwind);
  }
  return f;
}

}  // namespace

void EmitBoundsCheck(llvm::IRBuilder<>& b, const BoundsCheck& check, llvm::Value* fault,
                     llvm::BasicBlock* exit) {
  llvm::Function* func = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Value* index = check.index;
  const bool vector = index->getType()->isVectorTy();
  llvm::Value* limit = llvm::ConstantInt::get(index->getType(), check.num_elements);
  llvm::Value* bad = b.CreateICmpUGE(index, limit, "oob");
  if (check.mask != nullptr) bad = b.CreateAnd(bad, check.mask);
  llvm::Value* any = vector ? b.CreateOrReduce(bad) : bad;

  llvm::BasicBlock* fail = llvm::BasicBlock::Create(ctx, "bounds.fault", func);
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx, "bounds.ok", func);
  b.CreateCondBr(any, fail, ok, llvm::MDBuilder(ctx).createBranchWeights(1, 1 << 20));

  b.SetInsertPoint(fail);
  llvm::Value* reported = index;
  if (vector) {
    // The first failing lane: the lowest set bit of the lanes as an integer.
    const unsigned lanes = llvm::cast<llvm::FixedVectorType>(bad->getType())->getNumElements();
    llvm::Value* bits = b.CreateBitCast(bad, b.getIntNTy(lanes));
    llvm::Value* lane = b.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, bits, b.getTrue());
    reported = b.CreateExtractElement(index, lane);
  }
  b.CreateCall(FaultHandler(*func->getParent(), b),
               {fault, b.getInt32(check.buffer), reported, b.getInt64(check.num_elements),
                b.getInt32(check.is_store ? 1 : 0)});
  b.CreateBr(exit);
  b.SetInsertPoint(ok);
}

}  // namespace kiln::codegen
