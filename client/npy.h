// NumPy .npy files: the tensor format the CLI reads and writes.
#ifndef KILN_CLIENT_NPY_H_
#define KILN_CLIENT_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::client {

struct NpyArray {
  std::string datatype;  // "FP32" or "INT64": the KServe names
  std::vector<int64_t> shape;
  std::string data;  // raw little-endian, row-major
};

// Strict: versions 1-3, '<f4' or '<i8', C order, exact data length. Anything
// else is InvalidArgument saying what was found.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);
std::string SerializeNpy(const NpyArray& array);

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

}  // namespace kiln::client

#endif  // KILN_CLIENT_NPY_H_
