#include "compiler/frontend/onnx_external_data.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "compiler/frontend/onnx_importer.h"

namespace kiln {
namespace {

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// The bytes per element of an ONNX element type, 0 for ones Kiln refuses
// anyway (their count is then checked by the importer).
int64_t ElementBytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: return 1;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64: return 8;
    default: return 0;
  }
}

class Loader {
 public:
  Loader(const std::string& dir, int64_t max_bytes) : max_bytes_(max_bytes) {
    root_ = RealPath(dir);
  }

  absl::Status Load(onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL && t.external_data_size() == 0) {
      return absl::OkStatus();
    }
    const std::string what = absl::StrCat("tensor '", t.name(), "'");
    if (root_.empty()) {
      return absl::InvalidArgumentError(what + ": the model's directory cannot be resolved");
    }
    std::map<std::string, std::string> keys;
    for (const auto& e : t.external_data()) keys[e.key()] = e.value();
    const std::string location = keys["location"];
    if (location.empty() || location[0] == '/' || absl::StrContains(location, '\\')) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": external data location '", location,
          "' must be a relative path inside the model's directory"));
    }
    for (absl::string_view part : absl::StrSplit(location, '/')) {
      if (part == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": external data location '", location, "' climbs out with '..'"));
      }
    }
    const std::string file = RealPath(root_ + "/" + location);
    if (file.empty() || !absl::StartsWith(file, root_ + "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": external data file '", location,
          "' does not exist inside the model's directory (symlinks out are refused)"));
    }
    int64_t offset = 0, length = -1;
    if (keys.count("offset") && !absl::SimpleAtoi(keys["offset"], &offset)) offset = -1;
    if (keys.count("length") && !absl::SimpleAtoi(keys["length"], &length)) length = -2;
    if (offset < 0 || length < -1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bad offset or length for '",
                                                     location, "'"));
    }
    const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      if (fd >= 0) ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(what, ": external data file '", location,
                                                     "' is not a readable regular file"));
    }
    if (length == -1) length = st.st_size - offset;
    int64_t expected = ElementBytes(t.data_type());
    for (int64_t d : t.dims()) {
      if (d < 0 || (d > 0 && expected > INT64_MAX / d)) expected = -1;
      if (expected >= 0) expected *= d;
    }
    if (offset > st.st_size || length < 0 || length > st.st_size - offset ||
        (ElementBytes(t.data_type()) > 0 && length != expected)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": external data '", location, "' at offset ", offset, " length ", length,
          " does not hold the tensor's ", expected, " bytes (the file has ", st.st_size, ")"));
    }
    if (length > max_bytes_ - loaded_) {
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(
          what, ": external data past ", max_bytes_, " bytes in all (--max-upload-mb)"));
    }
    std::string* bytes = t.mutable_raw_data();
    bytes->assign(static_cast<size_t>(length), '\0');
    int64_t done = 0;
    while (done < length) {
      const ssize_t n = ::pread(fd, bytes->data() + done, length - done, offset + done);
      if (n <= 0) break;
      done += n;
    }
    ::close(fd);
    if (done != length) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": short read of '", location, "'"));
    }
    loaded_ += length;
    ++inlined_;
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    return absl::OkStatus();
  }

  int64_t inlined() const { return inlined_; }

  absl::Status Load(onnx::GraphProto& g) {
    for (onnx::TensorProto& t : *g.mutable_initializer()) KILN_RETURN_IF_ERROR(Load(t));
    for (onnx::NodeProto& n : *g.mutable_node()) KILN_RETURN_IF_ERROR(Load(n));
    return absl::OkStatus();
  }

  absl::Status Load(onnx::NodeProto& n) {
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_t()) KILN_RETURN_IF_ERROR(Load(*a.mutable_t()));
      for (onnx::TensorProto& t : *a.mutable_tensors()) KILN_RETURN_IF_ERROR(Load(t));
      if (a.has_g()) KILN_RETURN_IF_ERROR(Load(*a.mutable_g()));
      for (onnx::GraphProto& g : *a.mutable_graphs()) KILN_RETURN_IF_ERROR(Load(g));
    }
    return absl::OkStatus();
  }

 private:
  std::string root_;
  int64_t max_bytes_;
  int64_t loaded_ = 0;
  int64_t inlined_ = 0;  // tensors read in
};

absl::Status LoadInto(Loader& loader, onnx::ModelProto& model) {
  KILN_RETURN_IF_ERROR(loader.Load(*model.mutable_graph()));
  for (onnx::FunctionProto& f : *model.mutable_functions()) {
    for (onnx::NodeProto& n : *f.mutable_node()) KILN_RETURN_IF_ERROR(loader.Load(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadExternalData(onnx::ModelProto& model, const std::string& dir,
                              int64_t max_bytes) {
  Loader loader(dir, max_bytes);
  return LoadInto(loader, model);
}

absl::StatusOr<std::optional<std::string>> InlineOnnxExternalData(absl::string_view bytes,
                                                                  const std::string& dir,
                                                                  int64_t max_bytes) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("the bytes are no ONNX model");
  }
  Loader loader(dir, max_bytes);
  KILN_RETURN_IF_ERROR(LoadInto(loader, model));
  if (loader.inlined() == 0) return std::optional<std::string>();
  std::string out;
  if (model.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.SerializeToString(&out)) {
    return absl::ResourceExhaustedError(
        "the model with its external data read in is past protobuf's 2 GiB");
  }
  return std::optional<std::string>(std::move(out));
}

}  // namespace kiln
