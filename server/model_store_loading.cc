// The compiler service's side of the shared model store (engine/model_store.h):
// what a record is (a CompileModelRequest without name, version or
// `replace`, serialized deterministically, so the same model and options
// always make the same content key), and loading one as a compile that is
// not published again (a replica re-publishing what it just read could put
// back a mapping another replica had just replaced). A repository model's
// ONNX external data is read into the record: the other replicas have no
// such directory.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "compiler/frontend/onnx_importer.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/compiler_service.h"

namespace kiln::server {
namespace {

std::string StoreRecord(const kiln::v1::CompileModelRequest& request) {
  kiln::v1::CompileModelRequest bare = request;
  bare.clear_model_name();
  bare.clear_version();
  bare.clear_replace();
  std::string record;
  google::protobuf::io::StringOutputStream stream(&record);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);  // options hold maps
  bare.SerializeToCodedStream(&coded);
  coded.Trim();
  return record;
}

}  // namespace

void CompilerService::PublishToStore(const kiln::v1::CompileModelRequest& request,
                                     const std::string& name, int64_t version,
                                     const std::string& external_data_dir) {
  LogContext context;
  context.model = name;
  absl::Status s;
  if (!external_data_dir.empty() && request.has_onnx_model()) {
    // Other replicas have no such directory: the record carries the data.
    absl::StatusOr<std::optional<std::string>> inlined =
        InlineOnnxExternalData(request.onnx_model(), external_data_dir, store_->max_model_bytes());
    if (!inlined.ok()) {
      Log(LogLevel::kWarning, "model_store",
          absl::StrCat("version ", version,
                       " not published, other replicas will not serve it: its ONNX external data "
                       "cannot go into the model store (",
                       inlined.status().message(), ")"),
          context);
      return;
    }
    if (inlined->has_value()) {
      kiln::v1::CompileModelRequest whole = request;
      whole.set_onnx_model(**std::move(inlined));
      s = store_->Publish(name, version, StoreRecord(whole));
    } else {
      s = store_->Publish(name, version, StoreRecord(request));
    }
  } else {
    s = store_->Publish(name, version, StoreRecord(request));
  }
  // Too large: the store logged it once.
  if (s.ok() || absl::IsResourceExhausted(s)) return;
  Log(LogLevel::kWarning, "model_store",
      absl::StrCat("not published, other replicas will not serve it: ", s.message()), context);
}

absl::Status CompilerService::CheckWithStore(const kiln::v1::CompileModelRequest& request,
                                             const std::string& name,
                                             engine::ModelIdentity* identity) {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::optional<engine::StoredName>> mapped = store_->Lookup(name);
  if (!mapped.ok() || !mapped->has_value() || (*mapped)->removed()) return absl::OkStatus();
  const engine::StoredName& stored = **mapped;
  if (engine::ModelStore::ContentKey(StoreRecord(request)) == stored.content_key) {
    // The cluster's model already: served here as the cluster's version,
    // over whatever a stale local copy holds.
    identity->replace = true;
    identity->version = stored.version;
    return absl::OkStatus();
  }
  if (!identity->replace) {
    return absl::AlreadyExistsError(absl::StrCat(
        "model '", name, "' already serves another model in the cluster (version ", stored.version,
        ", in the model store); ask to replace it (CompileModelRequest.replace, kiln compile "
        "--replace) to serve this one as version ",
        stored.version + 1, ", or unload it first"));
  }
  if (identity->version == 0) {
    const std::vector<int64_t> local = models_->Versions(name);
    identity->version = std::max(stored.version, local.empty() ? 0 : local.back()) + 1;
  }
  return absl::OkStatus();
}

absl::Status CompilerService::ResolveFromStore(const std::string& name, absl::Time deadline) {
  if (store_ == nullptr) return absl::OkStatus();
  engine::ModelStoreHooks hooks;
  hooks.served = [this](const std::string& n) { return models_->Serve(n, "").ok(); };
  hooks.unload = [this](const std::string& n) {
    if (models_->Unload(n).ok()) {
      LogContext context;
      context.model = n;
      Log(LogLevel::kInfo, "model_store", "unloaded: the model store no longer holds it", context);
    }
  };
  hooks.load = [this](const std::string& n, int64_t version,
                      const std::string& record) -> absl::Status {
    kiln::v1::CompileModelRequest request;
    if (!request.ParseFromString(record)) {
      return absl::DataLossError(
          absl::StrCat("the model store's record for ", n, " is not a CompileModelRequest"));
    }
    request.set_model_name(n);
    request.set_version(version);
    request.set_replace(true);
    // Whoever asked may go: the load goes on for the requests after it.
    absl::StatusOr<kiln::v1::CompileModelResponse> compiled =
        Compile(request, nullptr, absl::InfiniteFuture(), nullptr, "", false,
                /*publish=*/false);
    if (!compiled.ok()) return compiled.status();
    LogContext context;
    context.model = n;
    Log(LogLevel::kInfo, "model_store",
        absl::StrCat(
            "loaded version ", version, " from the model store: ", compiled->report().cache_hits(),
            " kernels from the cache tiers, ", compiled->report().cache_misses(), " compiled here"),
        context);
    return absl::OkStatus();
  };
  return store_->Resolve(name, hooks, deadline);
}

absl::Status CompilerService::UnloadEverywhere(const std::string& name) {
  absl::Status local = models_->Unload(name);
  if (store_ == nullptr || (!local.ok() && !absl::IsNotFound(local))) return local;
  absl::StatusOr<bool> removed = store_->Remove(name);
  if (!removed.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "model '", name, "': the model store could not record the unload (",
        removed.status().message(), "); other replicas may still serve it: try again"));
  }
  return local.ok() || *removed ? absl::OkStatus() : local;
}

}  // namespace kiln::server
