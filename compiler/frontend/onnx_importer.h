// Converts an ONNX model (serialized ModelProto bytes) into Kiln's graph IR,
// using Debian's libonnx for parsing, the checker and shape inference.
// Malformed models are InvalidArgument naming the node; operators Kiln does
// not support are Unimplemented naming op type, node and opset. Tensors with
// external data are refused (InvalidArgument): no file named in a model is
// ever opened.
#ifndef KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_
#define KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"

namespace kiln {

class OpRegistry;

struct OnnxImportOptions {
  // Static shapes for inputs with symbolic dims (`--input-shape x=1x3x224x224`).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // What any other symbolic dim (typically the batch) becomes.
  int64_t default_symbolic_dim = 1;
};

absl::StatusOr<Graph> ImportOnnxModel(absl::string_view bytes, const OpRegistry& ops,
                                      const OnnxImportOptions& options);

// The model's graph inputs (initializers excluded) and outputs with their
// symbolic dims, after `options.input_shapes` fixed the inputs the user
// fixed. InvalidArgument as ImportOnnxModel for bytes that are not a model.
absl::StatusOr<ModelSignature> ReadOnnxSignature(absl::string_view bytes,
                                                 const OnnxImportOptions& options);

// The ONNX operator types the importer converts, sorted.
std::vector<std::string> SupportedOnnxOps();

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_
