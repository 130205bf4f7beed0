// Converts an ONNX model (serialized ModelProto bytes) into Kiln's graph IR,
// using Debian's libonnx for parsing, the checker and shape inference.
// Malformed models are InvalidArgument naming the node; operators Kiln does
// not support are Unimplemented naming op type, node and opset. Tensors with
// external data are refused (InvalidArgument): no file named in a model is
// ever opened.
#ifndef KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_
#define KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/verifier.h"

namespace kiln {

class OpRegistry;

struct OnnxImportOptions {
  // Static shapes for inputs with symbolic dims (`--input-shape x=1x3x224x224`).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // What any other symbolic dim (typically the batch) becomes.
  int64_t default_symbolic_dim = 1;
  // Values for int64 inputs that decide shapes (InputsThatDecideShapes):
  // they become constants of this graph, in their shape.
  std::map<std::string, std::vector<int64_t>> input_values;
  // More nodes, initializers and inputs than this: ResourceExhausted (as
  // CheckNodeLimit), before libonnx sees the model.
  int64_t max_nodes = kMaxGraphNodes;
  // Run libonnx's checker and shape inference in a child process first, so
  // that a crash in them refuses the model instead of killing the server.
  // Off only for bytes already imported once with it on.
  bool probe_libonnx = true;
  // libonnx's checker and shape inference at all. Off only to fuzz Kiln's
  // own checks and converters on models libonnx would refuse
  // (fuzz/onnx_converter_fuzzer.cc): they must refuse those too, never
  // crash, and without a child process per input the fuzzer runs ~80x
  // faster.
  bool libonnx_checks = true;
  // Set only for models the server loads from its own repository: the
  // directory external data is read from (onnx_external_data.h), at most
  // `max_external_data_bytes` in all. Empty: external data is refused.
  std::string external_data_dir;
  int64_t max_external_data_bytes = int64_t{2} << 30;
};

absl::StatusOr<Graph> ImportOnnxModel(absl::string_view bytes, const OpRegistry& ops,
                                      const OnnxImportOptions& options);

// The model's graph inputs (initializers excluded) and outputs with their
// symbolic dims, after `options.input_shapes` fixed the inputs the user
// fixed. InvalidArgument as ImportOnnxModel for bytes that are not a model.
absl::StatusOr<ModelSignature> ReadOnnxSignature(absl::string_view bytes,
                                                 const OnnxImportOptions& options);

// ReadOnnxSignature and ImportOnnxModel from one parse, so that a large
// model's weights are parsed once: the graph imports at the shapes
// `shapes_for` picks given the signature (merged into input_shapes).
// `graph` holds the import's own error; the call fails only when the bytes
// are not a model or `shapes_for` fails.
struct OnnxModelImport {
  ModelSignature signature;
  absl::StatusOr<Graph> graph = absl::UnknownError("not imported");
};
using ShapesForSignature =
    std::function<absl::StatusOr<std::map<std::string, std::vector<int64_t>>>(
        const ModelSignature& signature)>;
absl::StatusOr<OnnxModelImport> ImportOnnxModelWithSignature(
    absl::string_view bytes, const OpRegistry& ops, const OnnxImportOptions& options,
    const ShapesForSignature& shapes_for);

// For an import that failed because inputs decide shapes (an int64 input
// feeding a Reshape's shape, a Slice's bounds, ... directly or through a
// shape computation): their names, each needing a value in `input_values`.
// Empty for any other status.
std::vector<std::string> InputsThatDecideShapes(const absl::Status& status);

// The ONNX operator types the importer converts, sorted.
std::vector<std::string> SupportedOnnxOps();

// The ONNX model `bytes` made self-contained, its external data read in
// from `dir` as OnnxImportOptions::external_data_dir is (same checks and
// errors; ResourceExhausted past `max_bytes` in all), so that it loads
// without the directory (the model store's records). nullopt when it keeps
// no data outside. InvalidArgument for bytes that are no ONNX model.
absl::StatusOr<std::optional<std::string>> InlineOnnxExternalData(absl::string_view bytes,
                                                                  const std::string& dir,
                                                                  int64_t max_bytes);

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_ONNX_IMPORTER_H_
