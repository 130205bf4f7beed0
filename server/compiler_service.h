// Kiln's own service: compile, cache and timing queries, server facts.
#ifndef KILN_SERVER_COMPILER_SERVICE_H_
#define KILN_SERVER_COMPILER_SERVICE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "compiler/ir/verifier.h"
#include "proto/kiln_service.grpc.pb.h"
#include "engine/model_manager.h"
#include "engine/model_store.h"
#include "server/compile_slots.h"
#include "server/model_repository.h"
#include "server/token_table.h"

namespace kiln::server {

// The server's limits on what a CompileModel call may ask for.
struct CompileLimits {
  int max_concurrent_compiles = 2;          // --max-concurrent-compiles
  int64_t max_graph_nodes = kMaxGraphNodes;  // --max-graph-nodes
  int64_t max_upload_bytes = int64_t{2} << 30;  // --max-upload-mb
};

class CompilerService final : public kiln::v1::Compiler::Service {
 public:
  // `inference_cpus`: the CPUs CallKernel's and BenchmarkKernel's threads
  // are bound to (see cpu_affinity.h); empty for none.
  // At most `limits.max_concurrent_compiles` CompileModel calls run at
  // once (compile_slots.h).
  CompilerService(engine::ModelManager* models, std::vector<int> inference_cpus,
                  CompileLimits limits = {})
      : models_(models),
        inference_cpus_(std::move(inference_cpus)),
        limits_(limits),
        compile_slots_(limits.max_concurrent_compiles, /*max_waiting=*/64) {}

  // Calls must carry a token of `tokens` (null: none needed). Before the
  // server starts.
  void set_tokens(std::shared_ptr<const TokenTable> tokens) { tokens_ = std::move(tokens); }

  // The shared model store (null: none; engine/model_store.h), before the
  // server starts: every compile but a load from it publishes the model
  // there, UnloadModel removes it there.
  void set_model_store(engine::ModelStore* store) { store_ = store; }
  bool has_model_store() const { return store_ != nullptr; }
  // With a model store, brings this replica's copy of `name` in line with
  // it (loads it from the store, or unloads a name the store dropped); the
  // requests for a model call it before looking the model up. OK without a
  // store; a failed load's status otherwise.
  // `deadline`: the caller's, for waiting on another call's load.
  absl::Status ResolveFromStore(const std::string& name,
                                absl::Time deadline = absl::InfiniteFuture());
  // Unloads `name` here and, with a model store, for every replica: OK when
  // either held it, NotFound when neither did. A local failure other than
  // NotFound leaves the store alone; the store's own failure is Unavailable
  // (the other replicas still serve it, and this one would load it back from
  // the store): never an OK that does not hold.
  absl::Status UnloadEverywhere(const std::string& name);

  // Compiles every model of the repository at `dir` (model_repository.h),
  // the versions its policy selects, each under its name and version;
  // failures are logged and remembered for the calls that look for the
  // name. Returns how many model versions loaded.
  int LoadRepository(const std::string& dir);
  // Loads the model `name` of the repository at `dir` again, as
  // LoadRepository does, and unloads its versions the policy no longer
  // selects (or whose directory is gone): NotFound when the repository
  // holds no such model, else the first failure (not logged: the caller's).
  absl::Status LoadRepositoryModel(const std::string& dir, const std::string& name);
  // The version policy repository model `name` was last loaded with;
  // nullopt for a name never loaded from the repository.
  std::optional<inference::ModelVersionPolicy> VersionPolicyOf(const std::string& name) const;
  // Why each repository model version whose last load failed did.
  std::map<std::pair<std::string, int64_t>, std::string> VersionFailures() const;

  grpc::Status CompileModel(grpc::ServerContext*, const kiln::v1::CompileModelRequest* request,
                            kiln::v1::CompileModelResponse* response) override;
  grpc::Status CompileModelStream(grpc::ServerContext* context,
                                  const kiln::v1::CompileModelRequest* request,
                                  grpc::ServerWriter<kiln::v1::CompileProgress>* writer) override;
  grpc::Status UploadModel(grpc::ServerContext* context,
                           grpc::ServerReader<kiln::v1::ModelChunk>* reader,
                           kiln::v1::CompileModelResponse* response) override;
  grpc::Status ListKernels(grpc::ServerContext*, const kiln::v1::ListKernelsRequest*,
                           kiln::v1::ListKernelsResponse* response) override;
  grpc::Status CallKernel(grpc::ServerContext* context, const kiln::v1::CallKernelRequest* request,
                          kiln::v1::CallKernelResponse* response) override;
  grpc::Status BenchmarkKernel(grpc::ServerContext* context,
                               const kiln::v1::BenchmarkKernelRequest* request,
                               kiln::v1::BenchmarkKernelResponse* response) override;
  grpc::Status GetCacheStats(grpc::ServerContext*, const kiln::v1::GetCacheStatsRequest*,
                             kiln::v1::GetCacheStatsResponse* response) override;
  grpc::Status GetTimingStats(grpc::ServerContext*, const kiln::v1::GetTimingStatsRequest* request,
                              kiln::v1::GetTimingStatsResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext*, const kiln::v1::ListModelsRequest*,
                          kiln::v1::ListModelsResponse* response) override;
  grpc::Status UnloadModel(grpc::ServerContext*, const kiln::v1::UnloadModelRequest* request,
                           kiln::v1::UnloadModelResponse*) override;
  grpc::Status GetServerInfo(grpc::ServerContext*, const kiln::v1::GetServerInfoRequest*,
                             kiln::v1::GetServerInfoResponse* response) override;
  grpc::Status TuneModel(grpc::ServerContext* context, const kiln::v1::TuneModelRequest* request,
                         grpc::ServerWriter<kiln::v1::TuneProgress>* writer) override;

 private:
  // One model version of the repository compiled; its success logged, its
  // failure remembered (VersionFailures).
  absl::Status LoadFromRepository(const std::string& dir, const RepositoryModel& model);
  // The selected versions of each entry compiled (as many at once as
  // compile slots allow), then its versions not selected unloaded. One
  // status per entry: its first failure.
  std::vector<absl::Status> LoadEntries(const std::string& dir,
                                        const std::vector<RepositoryEntry>& entries);
  // CompileModel and CompileModelStream share this; `events` may be null.
  // `stop`: whether the caller has gone or its deadline passed, asked
  // between passes and kernels; the compile then ends and loads nothing.
  // `external_data_dir`: set only for models from the server's own
  // repository, where ONNX external data is read from (never for requests).
  // `publish`: put the model in the model store (not for one read from it).
  absl::StatusOr<kiln::v1::CompileModelResponse> Compile(
      const kiln::v1::CompileModelRequest& request, const engine::CompileEventSink& events,
      absl::Time deadline, std::function<bool()> stop,
      const std::string& external_data_dir = "", bool beside = false, bool publish = true);
  // The model's bytes and options (not its name, version or `replace`) to
  // the model store under `name` at `version`; a failure is logged (the
  // model is served here all the same). An ONNX model's external data in
  // `external_data_dir` is read into the record (other replicas lack the
  // directory); a model whose data does not fit is not published (logged).
  void PublishToStore(const kiln::v1::CompileModelRequest& request, const std::string& name,
                      int64_t version, const std::string& external_data_dir);
  // With a model store, `identity` as the cluster sees the name: from the
  // name's mapping alone (a few bytes), never by loading the model it maps.
  // AlreadyExists for another model without `replace`; with it, or for the
  // same model, `identity` takes the version it gets cluster-wide. The store
  // unreachable or knowing no such name leaves the check to local state.
  absl::Status CheckWithStore(const kiln::v1::CompileModelRequest& request, const std::string& name,
                              engine::ModelIdentity* identity);
  // Compile once the name is checked and marked compiling.
  absl::StatusOr<kiln::v1::CompileModelResponse> CompileNamed(
      const kiln::v1::CompileModelRequest& request, const std::string& name,
      const engine::ModelIdentity& identity, const engine::CompileEventSink& events,
      absl::Time deadline, std::function<bool()> stop, const std::string& external_data_dir);

  engine::ModelManager* models_;
  engine::ModelStore* store_ = nullptr;
  std::vector<int> inference_cpus_;
  CompileLimits limits_;
  std::shared_ptr<const TokenTable> tokens_;
  CompileSlots compile_slots_;
  // Serializes repository versions' publishes (Compile).
  absl::Mutex publish_mutex_;
  mutable absl::Mutex repository_mutex_;
  std::map<std::string, inference::ModelVersionPolicy> policies_
      ABSL_GUARDED_BY(repository_mutex_);
  std::map<std::pair<std::string, int64_t>, std::string> version_failures_
      ABSL_GUARDED_BY(repository_mutex_);
};

}  // namespace kiln::server

#endif  // KILN_SERVER_COMPILER_SERVICE_H_
