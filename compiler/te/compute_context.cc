#include "compiler/te/compute_context.h"

namespace kiln::te {

ScalarType ScalarTypeOf(DType dtype) {
  if (dtype == DType::kBool) return ScalarType::kBool;
  if (dtype == DType::kFloat64) return ScalarType::kF64;
  return IsFloatDType(dtype) ? ScalarType::kF32 : ScalarType::kI64;
}

std::optional<UnaryOp> NarrowingOp(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return UnaryOp::kWrapI8;
    case DType::kUInt8: return UnaryOp::kWrapU8;
    case DType::kInt16: return UnaryOp::kWrapI16;
    case DType::kUInt16: return UnaryOp::kWrapU16;
    case DType::kInt32: return UnaryOp::kWrapI32;
    case DType::kUInt32: return UnaryOp::kWrapU32;
    case DType::kFloat16: return UnaryOp::kRoundF16;
    case DType::kBFloat16: return UnaryOp::kRoundBF16;
    default: return std::nullopt;
  }
}

Expr ComputeContext::BroadcastInput(int i) {
  const std::vector<int64_t>& in_shape = input_types_[i].shape;
  const size_t out_rank = output_indices_.size();
  const size_t offset = out_rank - in_shape.size();
  std::vector<Expr> idx(in_shape.size());
  for (size_t d = 0; d < in_shape.size(); ++d) {
    idx[d] = in_shape[d] == 1 ? builder_.Int(0) : output_indices_[offset + d];
  }
  return Input(i, idx);
}

}  // namespace kiln::te
