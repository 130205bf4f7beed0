// Triton's model control modes for a --model-repository: which models load at
// start, whether the repository RPCs may load and unload, and whether the
// server follows the repository's changes by itself.
#ifndef KILN_SERVER_MODEL_CONTROL_H_
#define KILN_SERVER_MODEL_CONTROL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

enum class ModelControlMode {
  kNone,      // every model loads at start; RepositoryModelLoad/Unload refused
  kExplicit,  // the --load-model ones load at start; the RPCs load and unload
  kPoll,      // every model loads at start, then the repository is rescanned
};

// "none", "explicit" or "poll"; InvalidArgument naming the flag otherwise.
absl::StatusOr<ModelControlMode> ParseModelControlMode(absl::string_view text);
const char* ModelControlModeName(ModelControlMode mode);

// Whether `names` (--load-model) asks for every model ("*").
bool LoadsEveryModel(const std::vector<std::string>& names);

}  // namespace kiln::server

#endif  // KILN_SERVER_MODEL_CONTROL_H_
