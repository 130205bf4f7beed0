// Validating a ModelInferRequest against a model and answering it: the part of
// ModelInfer that knows the protocol's tensor encoding.
#ifndef KILN_SERVER_INFER_REQUEST_H_
#define KILN_SERVER_INFER_REQUEST_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/model_signature.h"
#include "proto/grpc_service.pb.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"
#include "server/kserve_datatype.h"

namespace kiln::server {

// The request's inputs as tensors in the model's input order. InvalidArgument
// naming the input and saying what was expected and what came (Unimplemented
// for BYTES). Typed contents are range-checked into narrower types; FP16 and
// BF16, which KServe has no typed field for, must come raw. `shapes`,
// when given, are the shapes to expect (one per program input, in order)
// instead of the program's: a model with symbolic dims, already checked.
// `consumed` names request inputs the program folded in as constants (its
// inputs that decide shapes): accepted and skipped.
absl::StatusOr<std::vector<runtime::Tensor>> DecodeInputs(
    const Program& program, const inference::ModelInferRequest& request,
    const std::vector<std::vector<int64_t>>* shapes = nullptr,
    const std::set<std::string>* consumed = nullptr);

// What a model with symbolic dims or inputs that decide shapes is compiled
// for (engine::VariantKey): every input's shape in the signature's order,
// then the values of the inputs that decide shapes, as int64. InvalidArgument
// naming a missing input or a value input that is not INT64 or INT32 of its size.
absl::StatusOr<std::vector<std::vector<int64_t>>> RequestVariantKey(
    const ModelSignature& signature, const inference::ModelInferRequest& request);

// Fills outputs (those requested, or all) and, when asked, the profile.
absl::Status EncodeOutputs(const Program& program, const inference::ModelInferRequest& request,
                           runtime::RunResult result, inference::ModelInferResponse* response);

}  // namespace kiln::server

#endif  // KILN_SERVER_INFER_REQUEST_H_
