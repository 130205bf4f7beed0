// A model repository on the server's disk (kiln-server --model-repository
// DIR), in Triton's layout: DIR/NAME/VERSION/model.onnx (or model.pb,
// model.pbtxt: a kiln.v1.Graph), each VERSION served under its number as a
// model of its own. Which versions of NAME are served is its version policy
// in DIR/NAME/config.pbtxt (version_policy.h; by default the highest). How
// models larger than any message get to the server without an upload.
//
// Only files inside DIR are read: names must be valid model names, versions
// digits, and the file, resolved, must lie inside DIR (no "..", no symlink
// out). External data in an ONNX file is refused as for uploads.
#ifndef KILN_SERVER_MODEL_REPOSITORY_H_
#define KILN_SERVER_MODEL_REPOSITORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/kiln_service.pb.h"
#include "proto/model_config.pb.h"

namespace kiln::server {

struct RepositoryModel {
  std::string name;
  int64_t version = 0;
  std::string path;  // of the model file
};

// A model's directory: its versions on disk and which of them it serves.
struct RepositoryEntry {
  std::string name;
  std::vector<RepositoryModel> versions;  // every version with a model file, ascending
  inference::ModelVersionPolicy policy;   // latest 1 unless config.pbtxt says
  absl::Status config;                    // why config.pbtxt was refused: nothing is served
  // The versions `policy` serves (none when `config` is not ok).
  std::vector<RepositoryModel> Selected() const;
};

// The directory a repository model's file is in (DIR/NAME/VERSION): where
// its ONNX external data may be read from.
std::string ModelDirectory(const RepositoryModel& model);

// Every model in `dir`, by name; names with no usable version are left
// out. InvalidArgument when `dir` is not a directory.
absl::StatusOr<std::vector<RepositoryEntry>> ScanRepository(const std::string& dir);

// The CompileModelRequest for `model` (its name, its file's contents);
// InvalidArgument for a file outside `dir`, not regular, or larger than
// `max_bytes`.
absl::StatusOr<kiln::v1::CompileModelRequest> RepositoryRequest(const std::string& dir,
                                                                const RepositoryModel& model,
                                                                int64_t max_bytes);

}  // namespace kiln::server

#endif  // KILN_SERVER_MODEL_REPOSITORY_H_
