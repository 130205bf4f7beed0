#include "server/repository_poller.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/model_repository.h"

namespace kiln::server {

std::string RepositoryModelFingerprint(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code error;
  const fs::path root = fs::path(dir) / name;
  // Symlinks are not followed: the repository loader reads only what lies
  // inside DIR (model_repository.h).
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code stat_error;
    const fs::file_status status = it->symlink_status(stat_error);
    if (stat_error || !fs::is_regular_file(status)) continue;
    const auto size = fs::file_size(it->path(), stat_error);
    const auto time = fs::last_write_time(it->path(), stat_error);
    if (stat_error) continue;
    files.push_back(absl::StrCat(fs::relative(it->path(), root, stat_error).string(), " ", size,
                                 " ", time.time_since_epoch().count()));
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const std::string& f : files) absl::StrAppend(&out, f, "\n");
  return out;
}

std::map<std::string, std::string> RepositoryFingerprints(const std::string& dir) {
  std::map<std::string, std::string> out;
  absl::StatusOr<std::vector<RepositoryEntry>> entries = ScanRepository(dir);
  if (!entries.ok()) return out;
  for (const RepositoryEntry& entry : *entries) {
    out[entry.name] = RepositoryModelFingerprint(dir, entry.name);
  }
  return out;
}

RepositoryPoller::RepositoryPoller(std::string dir, absl::Duration interval,
                                   std::map<std::string, std::string> seen,
                                   CompilerService* compiler, engine::ModelManager* models)
    : dir_(std::move(dir)),
      interval_(interval),
      compiler_(compiler),
      models_(models),
      seen_(std::move(seen)) {
  thread_ = std::thread([this] { Loop(); });
}

RepositoryPoller::~RepositoryPoller() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  thread_.join();
}

void RepositoryPoller::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mutex_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return stopping_; };
      mutex_.AwaitWithTimeout(absl::Condition(&stop), interval_);
      if (stopping_) return;
    }
    PollOnce();
  }
}

void RepositoryPoller::PollOnce() {
  std::map<std::string, std::string> now = RepositoryFingerprints(dir_);
  for (const auto& [name, fingerprint] : now) {
    auto before = seen_.find(name);
    if (before != seen_.end() && before->second == fingerprint) continue;
    Log(LogLevel::kInfo, "repository",
        absl::StrCat("model '", name, "' ", before == seen_.end() ? "appeared" : "changed", " in ",
                     dir_, ": loading it"));
    absl::Status loaded = compiler_->LoadRepositoryModel(dir_, name);
    if (!loaded.ok()) {
      Log(LogLevel::kWarning, "repository",
          absl::StrCat("model '", name, "' did not load: ", loaded.message()));
    }
  }
  for (const auto& [name, fingerprint] : seen_) {
    if (now.count(name)) continue;
    absl::Status unloaded = models_->Unload(name);
    Log(LogLevel::kInfo, "repository",
        absl::StrCat("model '", name, "' left ", dir_,
                     unloaded.ok() ? ": unloaded" : ": it was not loaded"));
  }
  seen_ = std::move(now);
}

}  // namespace kiln::server
