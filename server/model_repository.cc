#include "server/model_repository.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "server/version_policy.h"

namespace kiln::server {
namespace {

constexpr const char* kModelFiles[] = {"model.onnx", "model.pb", "model.pbtxt"};

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  return true;
}

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : "";
}

}  // namespace

absl::StatusOr<std::vector<RepositoryEntry>> ScanRepository(const std::string& dir) {
  if (!IsDirectory(dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-repository ", dir, " is not a directory"));
  }
  std::vector<RepositoryEntry> models;
  for (const std::string& name : Entries(dir)) {
    const std::string model_dir = absl::StrCat(dir, "/", name);
    if (!ValidName(name) || !IsDirectory(model_dir)) continue;
    RepositoryEntry entry;
    entry.name = name;
    for (const std::string& version : Entries(model_dir)) {
      int64_t number = 0;
      if (!absl::SimpleAtoi(version, &number) || number < 1 ||
          !IsDirectory(absl::StrCat(model_dir, "/", version))) {
        continue;
      }
      for (const char* file : kModelFiles) {  // in order of preference
        const std::string path = absl::StrCat(model_dir, "/", version, "/", file);
        if (::access(path.c_str(), R_OK) == 0) {
          entry.versions.push_back({name, number, path});
          break;
        }
      }
    }
    if (entry.versions.empty()) continue;
    std::sort(entry.versions.begin(), entry.versions.end(),
              [](const RepositoryModel& a, const RepositoryModel& b) {
                return a.version < b.version;
              });
    absl::StatusOr<inference::ModelVersionPolicy> policy = ReadVersionPolicy(model_dir);
    if (policy.ok()) {
      entry.policy = *std::move(policy);
    } else {
      entry.policy.mutable_latest()->set_num_versions(1);
      entry.config = policy.status();
    }
    models.push_back(std::move(entry));
  }
  std::sort(models.begin(), models.end(),
            [](const RepositoryEntry& a, const RepositoryEntry& b) { return a.name < b.name; });
  return models;
}

std::vector<RepositoryModel> RepositoryEntry::Selected() const {
  std::vector<RepositoryModel> out;
  if (!config.ok()) return out;
  std::vector<int64_t> numbers;
  for (const RepositoryModel& m : versions) numbers.push_back(m.version);
  const std::vector<int64_t> chosen = SelectVersions(policy, numbers);
  for (const RepositoryModel& m : versions) {
    if (std::find(chosen.begin(), chosen.end(), m.version) != chosen.end()) out.push_back(m);
  }
  return out;
}

std::string ModelDirectory(const RepositoryModel& model) {
  const size_t slash = model.path.find_last_of('/');
  return slash == std::string::npos ? "." : model.path.substr(0, slash);
}

absl::StatusOr<kiln::v1::CompileModelRequest> RepositoryRequest(const std::string& dir,
                                                                const RepositoryModel& model,
                                                                int64_t max_bytes) {
  const std::string root = RealPath(dir), file = RealPath(model.path);
  if (root.empty() || file.empty() || !absl::StartsWith(file, root + "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model.name, "': its file is not inside the repository"));
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model.name, "': its file is not a readable regular file"));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("model '", model.name, "': ", st.st_size,
                                                     " bytes, more than ", max_bytes,
                                                     " (--max-upload-mb)"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.name, "': short read"));
  }
  kiln::v1::CompileModelRequest request;
  request.set_model_name(model.name);
  if (absl::EndsWith(file, ".onnx")) {
    request.set_onnx_model(std::move(bytes));
  } else if (absl::EndsWith(file, ".pbtxt")) {
    if (!google::protobuf::TextFormat::ParseFromString(bytes, request.mutable_graph())) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", model.name, "': model.pbtxt is not a kiln.v1.Graph"));
    }
  } else if (!request.mutable_graph()->ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model.name, "': model.pb is not a kiln.v1.Graph"));
  }
  return request;
}

}  // namespace kiln::server
