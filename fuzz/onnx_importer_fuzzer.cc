// ONNX model bytes through the whole import a compile makes, libonnx's
// checker and shape inference included (in their sandbox child, so each
// input forks one: ~750 exec/s). See onnx_import_harness.h.
#include "fuzz/onnx_import_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::FuzzOnnxImport(data, size, /*libonnx_checks=*/true);
}
