// Indices into a dim of `size`, as gather takes them: each in [-size, size)
// (negative counts from the end). Checked on constants at compile time and
// on tensors the program holds at run time; kernels also clamp, so an index
// that escaped both checks could still never read outside a tensor.
#ifndef KILN_COMPILER_IR_INDEX_RANGE_H_
#define KILN_COMPILER_IR_INDEX_RANGE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "compiler/ir/dtype.h"
#include "compiler/ir/element_access.h"

namespace kiln {

// InvalidArgument naming `what`, the first index out of range, where it is
// and the range.
// `values` are `count` integers of `dtype` (int32 or int64 as ONNX allows).
inline absl::Status CheckIndicesInRange(DType dtype, const void* values, int64_t count,
                                        int64_t size, absl::string_view what) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = ReadElementAsInt(dtype, values, i);
    if (v < -size || v >= size) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": index ", v,
                                                     " (element ", i, ") is outside [", -size,
                                                     ", ", size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln

#endif  // KILN_COMPILER_IR_INDEX_RANGE_H_
