// Element types Kiln tensors can hold.
//
// A tensor is stored in its own type and computed in a wider one (see
// te::ScalarTypeOf): FLOAT16 and BFLOAT16 in float32, every integer type in
// int64, FLOAT64 in double. A kernel widens on load and narrows on store.
#ifndef KILN_COMPILER_IR_DTYPE_H_
#define KILN_COMPILER_IR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// Values are stable (structural hashes and the disk cache depend on them):
// new types go at the end.
enum class DType {
  kFloat32,
  kInt64,
  kBool,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kUInt64,
};

inline constexpr DType kAllDTypes[] = {
    DType::kFloat32, DType::kInt64,  DType::kBool,  DType::kFloat16, DType::kBFloat16,
    DType::kFloat64, DType::kInt8,   DType::kUInt8, DType::kInt16,   DType::kUInt16,
    DType::kInt32,   DType::kUInt32, DType::kUInt64};

// Bytes per element. Bool tensors are stored one byte per element.
int64_t DTypeSize(DType dtype);

// "float32", "int64", "bool", "float16", "bfloat16", "float64", "int8", ...:
// the spelling in printed IR, the cast op's `to` and error messages.
absl::string_view DTypeName(DType dtype);

// The DType spelled `name` (as DTypeName writes it), if any.
std::optional<DType> DTypeFromName(absl::string_view name);

bool IsFloatDType(DType dtype);     // float16, bfloat16, float32, float64
bool IsIntegerDType(DType dtype);   // signed and unsigned, not bool
bool IsUnsignedDType(DType dtype);  // uint8 ... uint64

}  // namespace kiln

#endif  // KILN_COMPILER_IR_DTYPE_H_
