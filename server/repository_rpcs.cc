// Triton's model repository extension: RepositoryIndex, RepositoryModelLoad,
// RepositoryModelUnload over --model-repository.
//
// A name's state, first that applies: READY while a model is served under
// it; LOADING while it compiles; UNAVAILABLE with the compiler's diagnostic
// when its last compile failed; UNAVAILABLE "unloaded" after
// RepositoryModelUnload; empty (Triton's "never loaded") for a repository
// model not loaded. The index lists the repository's models and every other
// name the server knows (models compiled through kiln.v1 are served too).
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/call_auth.h"
#include "server/compiler_service.h"
#include "server/inference_service.h"
#include "server/model_repository.h"
#include "server/status_conversion.h"

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
  std::map<std::string, Index> index;
  if (!repository_.empty()) {
    absl::StatusOr<std::vector<RepositoryModel>> models = ScanRepository(repository_);
    if (!models.ok()) return Fail("RepositoryIndex", models.status());
    for (const RepositoryModel& m : *models) {
      index[m.name].set_version(std::to_string(m.version));
    }
  }
  {
    absl::MutexLock lock(&unloaded_mutex_);
    for (const std::string& name : unloaded_) {
      index[name].set_state("UNAVAILABLE");
      index[name].set_reason("unloaded");
    }
  }
  for (const auto& [name, why] : models_->states().Failures()) {
    index[name].set_state("UNAVAILABLE");
    index[name].set_reason(why);
  }
  for (const std::string& name : models_->states().Compiling()) {
    index[name].set_state("LOADING");
    index[name].clear_reason();
  }
  for (const engine::ServedModel& served : models_->List()) {
    Index& entry = index[served.name];
    entry.set_version(std::to_string(served.version));
    entry.set_state("READY");
    entry.clear_reason();
  }
  for (auto& [name, entry] : index) {
    if (request->ready() && entry.state() != "READY") continue;
    entry.set_name(name);
    *response->add_models() = std::move(entry);
  }
  return grpc::Status::OK;
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
  const std::string& name = request->model_name();
  absl::Status unloaded = models_->Unload(name);
  if (absl::IsNotFound(unloaded)) {
    // Not loaded: done already, as for Triton, when the repository holds it.
    bool known = false;
    if (!repository_.empty()) {
      absl::StatusOr<std::vector<RepositoryModel>> models = ScanRepository(repository_);
      for (const RepositoryModel& m : models.ok() ? *models : std::vector<RepositoryModel>{}) {
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
