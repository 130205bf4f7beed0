// Bytes -> ParseNpy, the CLI's reader of --input files. What it accepts must
// survive SerializeNpy and a second parse unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "client/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kiln::client::NpyArray> array = kiln::client::ParseNpy(bytes);
  if (!array.ok()) return 0;
  absl::StatusOr<kiln::client::NpyArray> again =
      kiln::client::ParseNpy(kiln::client::SerializeNpy(*array));
  if (!again.ok() || again->datatype != array->datatype || again->shape != array->shape ||
      again->data != array->data) {
    std::fprintf(stderr, "npy round trip changed the array: %s\n",
                 again.ok() ? "different contents" : again.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
