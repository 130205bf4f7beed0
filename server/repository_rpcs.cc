// Triton's model repository extension: RepositoryIndex, RepositoryModelLoad,
// RepositoryModelUnload over --model-repository.
//
// One entry per model version. Its state, first that applies: READY while
// it is served; LOADING while its name compiles; UNAVAILABLE with the
// compiler's diagnostic when its last compile failed; UNAVAILABLE
// "unloaded" after RepositoryModelUnload; UNAVAILABLE when the model's
// version_policy does not select it; empty (Triton's "never loaded") for a
// repository version not loaded. The index lists the repository's models
// and every other model the server serves (compiled through kiln.v1).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/call_auth.h"
#include "server/compiler_service.h"
#include "server/inference_service.h"
#include "server/model_repository.h"
#include "server/status_conversion.h"
#include "server/version_policy.h"

namespace kiln::server {
namespace {

// The parameters Triton's clients send that Kiln can honour by ignoring:
// Kiln has no ensembles, so nothing depends on a model.
bool Ignorable(const std::string& key) { return key == "unload_dependents"; }

template <typename Request>
absl::Status CheckParameters(const Request& request, const char* what) {
  for (const auto& [key, value] : request.parameters()) {
    if (!Ignorable(key)) {
      return absl::UnimplementedError(
          absl::StrCat(what, " takes no parameter '", key,
                       "' in Kiln (a model's files and options come from the repository)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status InferenceService::RepositoryIndex(grpc::ServerContext* context,
                                               const inference::RepositoryIndexRequest* request,
                                               inference::RepositoryIndexResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "RepositoryIndex"); !a.ok()) {
    return a;
  }
  using Index = inference::RepositoryIndexResponse::ModelIndex;
  // Name, then version (0: a name whose version nobody knows, such as one
  // whose load failed before its versions were read).
  std::map<std::string, std::map<int64_t, Index>> index;
  std::set<std::pair<std::string, int64_t>> not_selected;
  auto at = [&index](const std::string& name, int64_t version) -> Index& {
    Index& entry = index[name][version];
    if (version > 0) entry.set_version(std::to_string(version));
    return entry;
  };
  // Each of the name's entries that `apply` may change, or a versionless
  // one when it has none.
  auto each = [&](const std::string& name, auto apply) {
    if (index[name].empty()) at(name, 0);
    for (auto& [version, entry] : index[name]) {
      if (!not_selected.count({name, version})) apply(entry);
    }
  };
  auto unavailable = [](Index& entry, const std::string& why) {
    entry.set_state("UNAVAILABLE");
    entry.set_reason(why);
  };
  if (!repository_.empty()) {
    absl::StatusOr<std::vector<RepositoryEntry>> models = ScanRepository(repository_);
    if (!models.ok()) return Fail("RepositoryIndex", models.status());
    for (const RepositoryEntry& m : *models) {
      const std::vector<RepositoryModel> selected = m.Selected();
      for (const RepositoryModel& v : m.versions) {
        Index& entry = at(m.name, v.version);
        if (!m.config.ok()) {
          unavailable(entry, std::string(m.config.message()));
        } else if (std::none_of(selected.begin(), selected.end(), [&v](const RepositoryModel& s) {
                     return s.version == v.version;
                   })) {
          unavailable(entry, absl::StrCat("version_policy (", DescribePolicy(m.policy),
                                          ") does not select it"));
          not_selected.insert({m.name, v.version});
        }
      }
      for (int64_t wanted : m.config.ok() && m.policy.has_specific()
                                ? std::vector<int64_t>(m.policy.specific().versions().begin(),
                                                       m.policy.specific().versions().end())
                                : std::vector<int64_t>{}) {
        if (index[m.name].count(wanted)) continue;
        unavailable(at(m.name, wanted), "version_policy names it; the repository holds no model "
                                        "file for it");
        not_selected.insert({m.name, wanted});
      }
    }
  }
  {
    absl::MutexLock lock(&unloaded_mutex_);
    for (const std::string& name : unloaded_) {
      each(name, [&](Index& entry) { unavailable(entry, "unloaded"); });
    }
  }
  for (const auto& [name, why] : models_->states().Failures()) {
    each(name, [&](Index& entry) {
      if (entry.state().empty()) unavailable(entry, why);
    });
  }
  if (compiler_ != nullptr) {
    for (const auto& [key, why] : compiler_->VersionFailures()) {
      unavailable(at(key.first, key.second), why);
    }
  }
  for (const std::string& name : models_->states().Compiling()) {
    each(name, [](Index& entry) {
      entry.set_state("LOADING");
      entry.clear_reason();
    });
  }
  for (const engine::ServedModel& served : models_->List()) {
    Index& entry = at(served.name, served.version);
    entry.set_state("READY");
    entry.clear_reason();
  }
  for (auto& [name, versions] : index) {
    if (versions.size() > 1) versions.erase(0);  // a placeholder beside real versions
    for (auto& [version, entry] : versions) {
      if (request->ready() && entry.state() != "READY") continue;
      entry.set_name(name);
      *response->add_models() = std::move(entry);
    }
  }
  return grpc::Status::OK;
}

absl::Status InferenceService::CheckModelControl(const char* rpc) const {
  // Triton refuses these outside explicit mode too (its code: UNAVAILABLE);
  // here FAILED_PRECONDITION, gRPC's code for a server not in the state the
  // call needs, which retrying will not change.
  if (repository_.empty() || model_control_ == ModelControlMode::kExplicit) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      rpc, " is refused in model control mode '", ModelControlModeName(model_control_),
      "': the server ", model_control_ == ModelControlMode::kPoll ? "follows" : "loaded",
      " the model repository by itself (start it with --model-control-mode=explicit to load "
      "and unload by request)"));
}

grpc::Status InferenceService::RepositoryModelLoad(
    grpc::ServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kAdmin, "RepositoryModelLoad");
      !a.ok()) {
    return a;
  }
  if (absl::Status s = CheckParameters(*request, "RepositoryModelLoad"); !s.ok()) {
    return Fail("RepositoryModelLoad", s);
  }
  if (absl::Status s = CheckModelControl("RepositoryModelLoad"); !s.ok()) {
    return Fail("RepositoryModelLoad", s);
  }
  if (repository_.empty() || compiler_ == nullptr) {
    return Fail("RepositoryModelLoad",
                absl::FailedPreconditionError(
                    "the server has no model repository to load from (start it with "
                    "--model-repository DIR, or compile models with kiln.v1 CompileModel)"));
  }
  {
    absl::MutexLock lock(&unloaded_mutex_);
    unloaded_.erase(request->model_name());
  }
  // Synchronous, as Triton's: the call returns once the model serves.
  absl::Status loaded = compiler_->LoadRepositoryModel(repository_, request->model_name());
  if (!loaded.ok()) return Fail("RepositoryModelLoad", loaded);
  return grpc::Status::OK;
}

grpc::Status InferenceService::RepositoryModelUnload(
    grpc::ServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kAdmin, "RepositoryModelUnload");
      !a.ok()) {
    return a;
  }
  if (absl::Status s = CheckParameters(*request, "RepositoryModelUnload"); !s.ok()) {
    return Fail("RepositoryModelUnload", s);
  }
  if (absl::Status s = CheckModelControl("RepositoryModelUnload"); !s.ok()) {
    return Fail("RepositoryModelUnload", s);
  }
  const std::string& name = request->model_name();
  // Cluster-wide with a model store (model_store.h).
  absl::Status unloaded =
      compiler_ != nullptr ? compiler_->UnloadEverywhere(name) : models_->Unload(name);
  if (absl::IsNotFound(unloaded)) {
    // Not loaded: done already, as for Triton, when the repository holds it.
    bool known = false;
    if (!repository_.empty()) {
      absl::StatusOr<std::vector<RepositoryEntry>> models = ScanRepository(repository_);
      for (const RepositoryEntry& m : models.ok() ? *models : std::vector<RepositoryEntry>{}) {
        known |= m.name == name;
      }
    }
    if (!known) return Fail("RepositoryModelUnload", unloaded);
  } else if (!unloaded.ok()) {
    return Fail("RepositoryModelUnload", unloaded);
  }
  absl::MutexLock lock(&unloaded_mutex_);
  unloaded_.insert(name);
  return grpc::Status::OK;
}

}  // namespace kiln::server
