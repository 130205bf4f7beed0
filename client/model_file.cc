#include "client/model_file.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace kiln::client {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (text.empty()) text = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string text;
};

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  // One read into a buffer of the file's size: a stringstream grew by
  // doubling and copied once more, 60-80 ms of a 45 MB model's "import".
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::InternalError(absl::StrCat("cannot tell the size of ", path));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return absl::InternalError(absl::StrCat("cannot read ", path));
  return bytes;
}

absl::StatusOr<kiln::v1::Graph> LoadGraphFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  kiln::v1::Graph graph;
  if (absl::EndsWith(path, ".pbtxt")) {
    google::protobuf::TextFormat::Parser parser;
    FirstError errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(*bytes, &graph)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", errors.text));
    }
    return graph;
  }
  if (!graph.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a binary kiln.v1.Graph (text files must end in .pbtxt)"));
  }
  return graph;
}

absl::Status LoadModelInto(const std::string& path, kiln::v1::CompileModelRequest* request) {
  if (absl::EndsWith(path, ".onnx")) {
    auto bytes = ReadFileBytes(path);
    if (!bytes.ok()) return bytes.status();
    request->set_onnx_model(*std::move(bytes));  // moved: a large model is held once
    return absl::OkStatus();
  }
  auto graph = LoadGraphFile(path);
  if (!graph.ok()) return graph.status();
  *request->mutable_graph() = *std::move(graph);
  return absl::OkStatus();
}

}  // namespace kiln::client
