// Shape rules shared by several op families.
#ifndef KILN_COMPILER_OPS_SHAPE_RELATIONS_H_
#define KILN_COMPILER_OPS_SHAPE_RELATIONS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/tensor_type.h"

namespace kiln {

// NumPy broadcasting of two shapes; InvalidArgument naming both when incompatible.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b);

// `axis` in [-rank, rank) made non-negative; InvalidArgument otherwise.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// InvalidArgument unless every type has `dtype`.
absl::Status RequireDType(const std::vector<TensorType>& types, DType dtype);

// Every type is the same float type (float16, bfloat16, float32 or float64).
absl::Status RequireFloat(const std::vector<TensorType>& types);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_SHAPE_RELATIONS_H_
