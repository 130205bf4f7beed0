// KServe v2's REST bodies, both ways: JSON (and Triton's binary tensor data
// extension) to the same inference:: messages the gRPC service takes, and its
// answers back to JSON. The translation only: the routes are in
// http_front_end, the semantics in InferenceService.
#ifndef KILN_SERVER_HTTP_KSERVE_JSON_H_
#define KILN_SERVER_HTTP_KSERVE_JSON_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/grpc_service.pb.h"

namespace kiln::server {

// A POST .../infer body. `json_length`: the Inference-Header-Content-Length
// header, when the body is a JSON header followed by binary tensors (each
// input with a `binary_data_size` parameter takes that many bytes, in input
// order). Every input ends up in raw_input_contents, little-endian, so that
// FP16 and BF16 (which have no typed field) come as JSON numbers too.
// InvalidArgument naming the field for anything malformed; Unimplemented for
// BYTES.
absl::StatusOr<inference::ModelInferRequest> ParseInferRequest(absl::string_view body,
                                                               std::optional<size_t> json_length,
                                                               const std::string& model,
                                                               const std::string& version);

// An HTTP answer's body; `json_length` set when binary tensors follow the
// JSON (the Inference-Header-Content-Length to send).
struct HttpBody {
  std::string body;
  std::optional<size_t> json_length;
};

// ModelInfer's answer to `request` (as ParseInferRequest made it): outputs
// as JSON `data`, or as binary when the request asked (`binary_data` on the
// output, else `binary_data_output` on the request).
absl::StatusOr<HttpBody> RenderInferResponse(const inference::ModelInferRequest& request,
                                             const inference::ModelInferResponse& response);

// The "parameters" object of a repository load or unload body (empty body:
// none) into the request's parameters, for the service to judge (it takes
// Triton's unload_dependents, refuses the rest as UNIMPLEMENTED).
// InvalidArgument for a body that is not a JSON object, or a value that is
// not a bool, integer or string.
absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* out);

std::string RenderServerMetadata(const inference::ServerMetadataResponse& metadata);
std::string RenderModelMetadata(const inference::ModelMetadataResponse& metadata);
// {"error": message}
std::string RenderError(absl::string_view message);

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_KSERVE_JSON_H_
