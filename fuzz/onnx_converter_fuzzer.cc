// ONNX model bytes through Kiln's own checks and converters with libonnx's
// checker and shape inference left out: models libonnx would refuse reach
// the converters too, which must refuse them as well, never crash. No
// sandbox child per input, so this target runs at in-process speed and
// covers the converters far more than onnx_importer_fuzzer can. Seeds:
// onnx_importer_fuzzer's (fuzz.bzl's `corpus`).
#include "fuzz/onnx_import_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::FuzzOnnxImport(data, size, /*libonnx_checks=*/false);
}
