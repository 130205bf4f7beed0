// Shape rules shared by several op families.
#ifndef KILN_COMPILER_OPS_SHAPE_RELATIONS_H_
#define KILN_COMPILER_OPS_SHAPE_RELATIONS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// A conv's output extent along one spatial dim: the input padded by
// `pad_begin` and `pad_end`, `kernel` taps `dilation` apart, every `stride`-th
// position. InvalidArgument, naming `op`, when the window exceeds the padded
// input.
absl::StatusOr<int64_t> ConvOutputExtent(absl::string_view op, int64_t input, int64_t pad_begin,
                                         int64_t pad_end, int64_t kernel, int64_t dilation,
                                         int64_t stride);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_SHAPE_RELATIONS_H_
