// CompilerService's model repository loading (--model-repository): each
// model's versions as its version_policy selects them, compiled as models of
// their own through the same Compile as CompileModel's, side by side
// (ModelIdentity.beside).
//
// A load, of the whole repository at start or of one model by
// RepositoryModelLoad, in three steps:
//   1. per model: remember its policy, forget its versions' old failures,
//      refuse a config.pbtxt that does not parse or a policy that selects
//      nothing;
//   2. compile every selected version, as many at once as compile slots
//      allow (--max-concurrent-compiles); each failure is remembered per
//      version for RepositoryIndex;
//   3. unload the model's loaded versions the policy no longer selects or
//      whose directory is gone, after the new ones loaded (requests for
//      "" move to a new highest version without a gap).
#include <algorithm>
#include <climits>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "server/compiler_service.h"
#include "server/model_repository.h"
#include "server/status_conversion.h"
#include "server/version_policy.h"

namespace kiln::server {

int CompilerService::LoadRepository(const std::string& dir) {
  absl::StatusOr<std::vector<RepositoryEntry>> models = ScanRepository(dir);
  if (!models.ok()) {
    Fail("LoadRepository", models.status());
    return 0;
  }
  for (const absl::Status& s : LoadEntries(dir, *models)) {
    if (!s.ok()) Fail("LoadRepository", s);
  }
  int loaded = 0;
  for (const RepositoryEntry& entry : *models) {
    loaded += static_cast<int>(models_->Versions(entry.name).size());
  }
  return loaded;
}

absl::Status CompilerService::LoadRepositoryModel(const std::string& dir,
                                                  const std::string& name) {
  absl::StatusOr<std::vector<RepositoryEntry>> models = ScanRepository(dir);
  if (!models.ok()) return models.status();
  for (const RepositoryEntry& entry : *models) {
    if (entry.name == name) return LoadEntries(dir, {entry}).front();
  }
  return absl::NotFoundError(absl::StrCat("the model repository ", dir, " holds no model '",
                                          name, "' (DIR/NAME/VERSION/model.onnx, .pb or .pbtxt)"));
}

std::vector<absl::Status> CompilerService::LoadEntries(
    const std::string& dir, const std::vector<RepositoryEntry>& entries) {
  struct Job {
    size_t entry;
    RepositoryModel model;
  };
  std::vector<Job> jobs;
  std::vector<absl::Status> results(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const RepositoryEntry& entry = entries[i];
    {
      absl::MutexLock lock(&repository_mutex_);
      policies_[entry.name] = entry.policy;
      // Every version's, those of versions deleted since too.
      version_failures_.erase(version_failures_.lower_bound({entry.name, INT64_MIN}),
                              version_failures_.upper_bound({entry.name, INT64_MAX}));
    }
    if (!entry.config.ok()) {
      models_->states().Failed(entry.name, entry.config);
      results[i] = entry.config;
      continue;
    }
    const std::vector<RepositoryModel> selected = entry.Selected();
    if (selected.empty()) {
      std::vector<int64_t> on_disk;
      for (const RepositoryModel& m : entry.versions) on_disk.push_back(m.version);
      results[i] = absl::InvalidArgumentError(absl::StrCat(
          "model '", entry.name, "': its version_policy (", DescribePolicy(entry.policy),
          ") selects none of the versions in the repository (", absl::StrJoin(on_disk, ", "),
          ")"));
      models_->states().Failed(entry.name, results[i]);
    }
    for (const RepositoryModel& m : selected) jobs.push_back({i, m});
  }
  // Versions compile side by side as separate models; the compile slots
  // (--max-concurrent-compiles) bound how many at once, so as many threads.
  std::vector<absl::Status> job_results(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < jobs.size(); j = next++) {
      job_results[j] = LoadFromRepository(dir, jobs[j].model);
    }
  };
  std::vector<std::thread> threads;
  const size_t parallel = std::min<size_t>(
      jobs.size(), static_cast<size_t>(std::max(1, limits_.max_concurrent_compiles)));
  for (size_t t = 1; t < parallel; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (size_t j = 0; j < jobs.size(); ++j) {
    absl::Status& first = results[jobs[j].entry];
    if (first.ok()) first = job_results[j];
  }
  for (const RepositoryEntry& entry : entries) {
    if (!entry.config.ok()) continue;
    const std::vector<RepositoryModel> selected = entry.Selected();
    for (int64_t version : models_->Versions(entry.name)) {
      const bool keep = std::any_of(selected.begin(), selected.end(),
                                    [&](const RepositoryModel& m) { return m.version == version; });
      if (keep || !models_->UnloadVersion(entry.name, version).ok()) continue;
      const bool on_disk =
          std::any_of(entry.versions.begin(), entry.versions.end(),
                      [&](const RepositoryModel& m) { return m.version == version; });
      LogContext context;
      context.model = entry.name;
      Log(LogLevel::kInfo, "repository",
          absl::StrCat("unloaded version ", version, ": ",
                       on_disk ? absl::StrCat("version_policy ", DescribePolicy(entry.policy),
                                              " no longer selects it")
                               : "its directory is gone"),
          context);
    }
  }
  return results;
}

std::optional<inference::ModelVersionPolicy> CompilerService::VersionPolicyOf(
    const std::string& name) const {
  absl::MutexLock lock(&repository_mutex_);
  auto it = policies_.find(name);
  if (it == policies_.end()) return std::nullopt;
  return it->second;
}

std::map<std::pair<std::string, int64_t>, std::string> CompilerService::VersionFailures() const {
  absl::MutexLock lock(&repository_mutex_);
  return version_failures_;
}

absl::Status CompilerService::LoadFromRepository(const std::string& dir,
                                                 const RepositoryModel& model) {
  absl::StatusOr<kiln::v1::CompileModelRequest> request =
      RepositoryRequest(dir, model, limits_.max_upload_bytes);
  if (!request.ok()) {
    models_->states().Failed(model.name, request.status());
    absl::MutexLock lock(&repository_mutex_);
    version_failures_[{model.name, model.version}] = std::string(request.status().message());
    return request.status();
  }
  request->set_version(model.version);
  request->set_replace(true);
  absl::StatusOr<kiln::v1::CompileModelResponse> compiled =
      Compile(*request, nullptr, absl::InfiniteFuture(), nullptr, ModelDirectory(model),
              /*beside=*/true);
  if (!compiled.ok()) {
    absl::MutexLock lock(&repository_mutex_);
    version_failures_[{model.name, model.version}] = std::string(compiled.status().message());
    return absl::Status(compiled.status().code(),
                        absl::StrCat("model '", model.name, "' version ", model.version, ": ",
                                     compiled.status().message()));
  }
  LogContext context;
  context.model = model.name;
  Log(LogLevel::kInfo, "repository",
      absl::StrCat("loaded version ", model.version, " from the repository (",
                   compiled->report().kernels_size(), " kernels)"),
      context);
  return absl::OkStatus();
}

}  // namespace kiln::server
