#include "client/model_inputs.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/did_you_mean.h"
#include "onnx/onnx_pb.h"

namespace kiln::client {

absl::StatusOr<std::vector<std::string>> ModelInputNames(
    const kiln::v1::CompileModelRequest& request) {
  std::vector<std::string> names;
  if (request.has_onnx_model()) {
    onnx::ModelProto model;
    if (!model.ParseFromString(request.onnx_model())) {
      return absl::InvalidArgumentError("the ONNX model does not parse as a ModelProto");
    }
    std::set<std::string> initialized;
    for (const onnx::TensorProto& t : model.graph().initializer()) initialized.insert(t.name());
    for (const onnx::ValueInfoProto& in : model.graph().input()) {
      if (!initialized.count(in.name())) names.push_back(in.name());
    }
    return names;
  }
  for (const kiln::v1::ValueInfo& in : request.graph().inputs()) names.push_back(in.name());
  return names;
}

absl::Status CheckInputNames(const std::vector<std::string>& named,
                             const std::vector<std::string>& inputs, const std::string& flag) {
  for (const std::string& name : named) {
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " names input '", name, "', which the model does not have",
                     DidYouMean(name, inputs), "; its inputs: ", absl::StrJoin(inputs, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace kiln::client
