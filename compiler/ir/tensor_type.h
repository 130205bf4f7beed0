// The static type of a value: element type and shape.
#ifndef KILN_COMPILER_IR_TENSOR_TYPE_H_
#define KILN_COMPILER_IR_TENSOR_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/dtype.h"

namespace kiln {

// Upper bound on the elements of one tensor: keeps byte sizes far from int64 overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 36;

struct TensorType {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  // Product of the dims; only meaningful for a validated type (see CheckedNumElements).
  int64_t NumElements() const;
  int64_t ByteSize() const { return NumElements() * DTypeSize(dtype); }
  // "float32[1,64,56,56]".
  std::string ToString() const;

  bool operator==(const TensorType& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const TensorType& other) const { return !(*this == other); }
};

// The element count of `shape`, or InvalidArgument when a dim is negative or the
// product exceeds kMaxTensorElements (computed without overflow).
absl::StatusOr<int64_t> CheckedNumElements(const std::vector<int64_t>& shape);

std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_TENSOR_TYPE_H_
