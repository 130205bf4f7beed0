// ONNX model bytes through the whole import a compile makes, libonnx's
// checker and shape inference included (in their sandbox child, so each
// input forks one: 200 to 750 exec/s on 2 cores; README, "Fuzzing and
// sanitizers", says what it covers beside onnx_converter_fuzzer).
// See onnx_import_harness.h.
#include "fuzz/onnx_import_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::FuzzOnnxImport(data, size, /*libonnx_checks=*/true);
}
