#include "compiler/codegen/element_conversion.h"

namespace kiln::codegen {
namespace {

// `scalar` with `model`'s vector shape, if it has one.
llvm::Type* Like(llvm::Type* scalar, llvm::Value* model) {
  if (auto* v = llvm::dyn_cast<llvm::FixedVectorType>(model->getType())) {
    return llvm::FixedVectorType::get(scalar, v->getNumElements());
  }
  return scalar;
}

}  // namespace

llvm::Type* StorageElementType(llvm::LLVMContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return llvm::Type::getFloatTy(ctx);
    case DType::kFloat64: return llvm::Type::getDoubleTy(ctx);
    case DType::kFloat16: return llvm::Type::getHalfTy(ctx);
    case DType::kBFloat16: return llvm::Type::getInt16Ty(ctx);
    default: return llvm::Type::getIntNTy(ctx, static_cast<unsigned>(DTypeSize(dtype) * 8));
  }
}

llvm::Value* WidenFromStorage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* stored) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
      return stored;
    case DType::kBool:
      return b.CreateTrunc(stored, Like(b.getInt1Ty(), stored));
    case DType::kFloat16:
      return b.CreateFPExt(stored, Like(b.getFloatTy(), stored));
    case DType::kBFloat16: {
      llvm::Value* wide = b.CreateZExt(stored, Like(b.getInt32Ty(), stored));
      wide = b.CreateShl(wide, llvm::ConstantInt::get(wide->getType(), 16));
      return b.CreateBitCast(wide, Like(b.getFloatTy(), stored));
    }
    default:
      return IsUnsignedDType(dtype) ? b.CreateZExt(stored, Like(b.getInt64Ty(), stored))
                                    : b.CreateSExt(stored, Like(b.getInt64Ty(), stored));
  }
}

llvm::Value* FloatToBFloat16Bits(llvm::IRBuilderBase& b, llvm::Value* value) {
  llvm::Type* i32 = Like(b.getInt32Ty(), value);
  auto c = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  llvm::Value* bits = b.CreateBitCast(value, i32);
  // bits + 0x7fff + (bit 16): ties go to the even bfloat16.
  llvm::Value* odd = b.CreateAnd(b.CreateLShr(bits, c(16)), c(1));
  llvm::Value* rounded = b.CreateAdd(bits, b.CreateAdd(c(0x7fff), odd));
  llvm::Value* quiet_nan = b.CreateOr(bits, c(0x400000));
  llvm::Value* is_nan = b.CreateFCmpUNO(value, value);
  llvm::Value* chosen = b.CreateSelect(is_nan, quiet_nan, rounded);
  return b.CreateTrunc(b.CreateLShr(chosen, c(16)), Like(b.getInt16Ty(), value));
}

llvm::Value* NarrowToStorage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* value) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
      return value;
    case DType::kBool:
      return b.CreateZExt(value, Like(b.getInt8Ty(), value));
    case DType::kFloat16:
      return b.CreateFPTrunc(value, Like(b.getHalfTy(), value));
    case DType::kBFloat16:
      return FloatToBFloat16Bits(b, value);
    default:
      return b.CreateTrunc(
          value, Like(b.getIntNTy(static_cast<unsigned>(DTypeSize(dtype) * 8)), value));
  }
}

}  // namespace kiln::codegen
