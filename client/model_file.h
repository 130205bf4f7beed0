// Reading model files for `kiln compile` and `kiln bench`.
#ifndef KILN_CLIENT_MODEL_FILE_H_
#define KILN_CLIENT_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"
#include "proto/kiln_service.pb.h"

namespace kiln::client {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// A kiln.v1.Graph from `.pbtxt` text format or binary protobuf (other names).
// InvalidArgument with the parser's line and column on malformed text.
absl::StatusOr<kiln::v1::Graph> LoadGraphFile(const std::string& path);

// The model at `path` into the request: an ONNX file (.onnx) travels as
// bytes, the server parses it; anything else is read as a Kiln graph.
absl::Status LoadModelInto(const std::string& path, kiln::v1::CompileModelRequest* request);

}  // namespace kiln::client

#endif  // KILN_CLIENT_MODEL_FILE_H_
