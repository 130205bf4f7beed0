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
  std::string datatype;  // KServe's name: "FP32", "INT8", "BOOL", ... (client/element_type.h)
  std::vector<int64_t> shape;
  std::string data;  // raw little-endian, row-major
};

// Strict: versions 1-3, a little-endian dtype of client/element_type.h ('<f2',
// '<f4', '<f8', '|i1' ... '<u8', '|b1'), C order, exact data length. Anything
// else is InvalidArgument saying what was found. Never yields BF16.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// A .npy file as NumPy's np.save writes it (version 1.0). bfloat16 has no
// NumPy dtype: a BF16 array is written as float32, which holds each value
// exactly. A datatype the client does not know is written as its bytes
// ('|u1', one dim); WriteNpyFile refuses it instead.
std::string SerializeNpy(const NpyArray& array);

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

// An FP32 array as BF16, each value rounded to nearest even: how a float32
// .npy feeds a BF16 input, NumPy having no bfloat16. Other arrays unchanged.
NpyArray Float32ToBFloat16(NpyArray array);

}  // namespace kiln::client

#endif  // KILN_CLIENT_NPY_H_
