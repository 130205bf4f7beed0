// The ONNX importer fuzz targets' body: raw bytes ->
// ImportOnnxModelWithSignature, as CompileModel does with an ONNX model: the
// parse, the attribute pre-checks, (with `libonnx_checks`) libonnx's checker
// and shape inference, then the conversion. Symbolic dims become 1; when
// int64 inputs decide shapes, the import is retried with values for them, as
// a request bringing those values would: -1 then 1s, which any Reshape
// accepts.
#ifndef KILN_FUZZ_ONNX_IMPORT_HARNESS_H_
#define KILN_FUZZ_ONNX_IMPORT_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"

namespace kiln::fuzz {

// Values given to an input that decides shapes; larger ones are left alone.
constexpr int64_t kMaxValueElements = 16;

inline std::vector<int64_t> Concrete(const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(d == kiln::TensorSignature::kSymbolicDim ? 1 : d);
  return out;
}

inline int FuzzOnnxImport(const uint8_t* data, size_t size, bool libonnx_checks) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const kiln::OpRegistry& ops = kiln::OpRegistry::Default();
  kiln::OnnxImportOptions options;
  options.libonnx_checks = libonnx_checks;
  std::map<std::string, std::vector<int64_t>> shapes;
  auto shapes_for = [&shapes](const kiln::ModelSignature& signature)
      -> absl::StatusOr<std::map<std::string, std::vector<int64_t>>> {
    for (const kiln::TensorSignature& input : signature.inputs) {
      shapes[input.name] = Concrete(input.dims);
    }
    return shapes;
  };
  absl::StatusOr<kiln::OnnxModelImport> imported =
      kiln::ImportOnnxModelWithSignature(bytes, ops, options, shapes_for);
  if (!imported.ok() || imported->graph.ok()) return 0;

  const std::vector<std::string> deciding = kiln::InputsThatDecideShapes(imported->graph.status());
  if (deciding.empty()) return 0;
  kiln::OnnxImportOptions with_values;
  with_values.libonnx_checks = libonnx_checks;
  with_values.input_shapes = shapes;
  for (const std::string& name : deciding) {
    auto shape = shapes.find(name);
    if (shape == shapes.end()) return 0;
    int64_t n = 1;
    for (int64_t d : shape->second) {
      if (d < 0 || d > kMaxValueElements) return 0;
      n *= d;
      if (n > kMaxValueElements) return 0;
    }
    std::vector<int64_t> values(static_cast<size_t>(n), 1);
    if (!values.empty()) values[0] = -1;
    with_values.input_values[name] = std::move(values);
  }
  (void)kiln::ImportOnnxModel(bytes, ops, with_values);
  return 0;
}

}  // namespace kiln::fuzz

#endif  // KILN_FUZZ_ONNX_IMPORT_HARNESS_H_
