// Element types Kiln tensors can hold.
#ifndef KILN_COMPILER_IR_DTYPE_H_
#define KILN_COMPILER_IR_DTYPE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

enum class DType { kFloat32, kInt64, kBool };

// Bytes per element. Bool tensors are stored one byte per element.
int64_t DTypeSize(DType dtype);

// "float32", "int64", "bool": the spelling in printed IR and error messages.
absl::string_view DTypeName(DType dtype);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_DTYPE_H_
