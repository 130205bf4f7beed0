// ONNX external data, for models the server loads from its own model
// repository: tensors whose bytes live in files beside model.onnx (how
// models past protobuf's 2 GiB are saved) are read in, strictly from inside
// the model's own directory. Uploaded models never get here: their
// external data stays refused (a client must not make the server read its
// files).
#ifndef KILN_COMPILER_FRONTEND_ONNX_EXTERNAL_DATA_H_
#define KILN_COMPILER_FRONTEND_ONNX_EXTERNAL_DATA_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace kiln {

// Fills every tensor of `model` (initializers, Constant and other node
// attributes, subgraphs) that keeps its data outside with the bytes its
// `location`, `offset` and `length` name, relative to `dir`, and marks it
// self-contained. InvalidArgument naming tensor and file for a location
// that is absolute, climbs out with "..", resolves (through symlinks)
// outside `dir`, is not a regular file, or does not hold the tensor's
// bytes; ResourceExhausted past `max_bytes` in all.
absl::Status LoadExternalData(onnx::ModelProto& model, const std::string& dir, int64_t max_bytes);

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_ONNX_EXTERNAL_DATA_H_
