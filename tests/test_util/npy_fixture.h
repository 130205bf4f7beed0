// Reads the float32 .npy fixtures NumPy writes for tests, so tests need not
// depend on the client's general .npy reader.
#ifndef KILN_TESTS_TEST_UTIL_NPY_FIXTURE_H_
#define KILN_TESTS_TEST_UTIL_NPY_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::testing {

struct NpyFloat32 {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major

  // The values' bytes, little-endian: what raw_data and raw contents carry.
  std::string bytes() const {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
};

// Format versions 1 to 3, C order, dtype '<f4' only; InvalidArgument for any
// other file (NotFound when it cannot be opened).
absl::StatusOr<NpyFloat32> ReadNpyFloat32(const std::string& path);

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_NPY_FIXTURE_H_
