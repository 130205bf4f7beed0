#include "compiler/te/compute_context.h"

namespace kiln::te {

ScalarType ScalarTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ScalarType::kF32;
    case DType::kInt64:
      return ScalarType::kI64;
    case DType::kBool:
      return ScalarType::kBool;
  }
  return ScalarType::kF32;
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
