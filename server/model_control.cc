#include "server/model_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::server {

absl::StatusOr<ModelControlMode> ParseModelControlMode(absl::string_view text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "explicit") return ModelControlMode::kExplicit;
  if (text == "poll") return ModelControlMode::kPoll;
  return absl::InvalidArgumentError(absl::StrCat(
      "--model-control-mode must be none, explicit or poll (Triton's modes), not '", text, "'"));
}

const char* ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone:
      return "none";
    case ModelControlMode::kExplicit:
      return "explicit";
    case ModelControlMode::kPoll:
      return "poll";
  }
  return "none";
}

bool LoadsEveryModel(const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), "*") != names.end();
}

}  // namespace kiln::server
