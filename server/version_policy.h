// A repository model's version policy (Triton's ModelVersionPolicy, read
// from DIR/NAME/config.pbtxt): which of the versions on disk are served.
// Triton's semantics: latest N (the N numerically greatest; the default is
// latest 1), all, or specific versions.
#ifndef KILN_SERVER_VERSION_POLICY_H_
#define KILN_SERVER_VERSION_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/model_config.pb.h"

namespace kiln::server {

// The policy in `model_dir`/config.pbtxt; latest 1 when the file is absent
// or sets none. InvalidArgument for a file that is not a Triton ModelConfig
// in text format (fields Kiln does not know are skipped) or a policy of
// latest 0.
absl::StatusOr<inference::ModelVersionPolicy> ReadVersionPolicy(const std::string& model_dir);

// The versions of `available` that `policy` serves, ascending.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available);

// "latest 2", "all", "specific 1, 3": for logs and reasons.
std::string DescribePolicy(const inference::ModelVersionPolicy& policy);

}  // namespace kiln::server

#endif  // KILN_SERVER_VERSION_POLICY_H_
