// The input names of a model about to be compiled, read on the client so a
// flag naming an input the model lacks (--input-shape) is an error with a
// "did you mean" instead of a flag the server never applies.
#ifndef KILN_CLIENT_MODEL_INPUTS_H_
#define KILN_CLIENT_MODEL_INPUTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/kiln_service.pb.h"

namespace kiln::client {

// The graph's inputs: an ONNX model's graph inputs that no initializer
// supplies, or a Kiln graph's declared inputs. InvalidArgument when the
// ONNX bytes do not parse (the server would refuse them too).
absl::StatusOr<std::vector<std::string>> ModelInputNames(
    const kiln::v1::CompileModelRequest& request);

// InvalidArgument naming the first of `named` (given by `flag`) that is not
// in `inputs`, with the closest input and the model's inputs; OK otherwise.
absl::Status CheckInputNames(const std::vector<std::string>& named,
                             const std::vector<std::string>& inputs, const std::string& flag);

}  // namespace kiln::client

#endif  // KILN_CLIENT_MODEL_INPUTS_H_
