// A model repository on the server's disk (kiln-server --model-repository
// DIR), in Triton's layout: DIR/NAME/VERSION/model.onnx (or model.pb,
// model.pbtxt: a kiln.v1.Graph). The highest numeric VERSION of each NAME
// is the one served, under that version number. How models larger than any
// message get to the server without an upload.
//
// Only files inside DIR are read: names must be valid model names, versions
// digits, and the file, resolved, must lie inside DIR (no "..", no symlink
// out). External data in an ONNX file is refused as for uploads.
#ifndef KILN_SERVER_MODEL_REPOSITORY_H_
#define KILN_SERVER_MODEL_REPOSITORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/kiln_service.pb.h"

namespace kiln::server {

struct RepositoryModel {
  std::string name;
  int64_t version = 0;
  std::string path;  // of the model file
};

// The directory a repository model's file is in (DIR/NAME/VERSION): where
// its ONNX external data may be read from.
std::string ModelDirectory(const RepositoryModel& model);

// Every model in `dir` at its highest version; names with no usable
// version are left out. InvalidArgument when `dir` is not a directory.
absl::StatusOr<std::vector<RepositoryModel>> ScanRepository(const std::string& dir);

// The CompileModelRequest for `model` (its name, its file's contents);
// InvalidArgument for a file outside `dir`, not regular, or larger than
// `max_bytes`.
absl::StatusOr<kiln::v1::CompileModelRequest> RepositoryRequest(const std::string& dir,
                                                                const RepositoryModel& model,
                                                                int64_t max_bytes);

}  // namespace kiln::server

#endif  // KILN_SERVER_MODEL_REPOSITORY_H_
