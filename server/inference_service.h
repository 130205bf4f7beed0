// The KServe v2 / Triton inference protocol over Kiln's models.
#ifndef KILN_SERVER_INFERENCE_SERVICE_H_
#define KILN_SERVER_INFERENCE_SERVICE_H_

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/model_manager.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/model_control.h"
#include "server/token_table.h"

namespace kiln::server {

class CompilerService;

// What ModelMetadata and ModelConfig say runs Kiln's models: Kiln's JIT, not
// ONNX Runtime, whatever format the model came in; a client that branched
// on "onnxruntime_onnx" would expect ONNX Runtime's behaviour.
inline constexpr char kPlatform[] = "kiln";

// ServerMetadata's extensions: Triton's names for the ones Kiln implements
// over gRPC (model_repository: RepositoryIndex/Load/Unload, with
// unload_dependents accepted; model_configuration: ModelConfig; statistics:
// ModelStatistics), and Kiln's own request parameter.
inline constexpr const char* kExtensions[] = {
    "model_repository", "model_repository(unload_dependents)", "model_configuration",
    "statistics", "kiln.profile"};

class InferenceService : public inference::GRPCInferenceService::Service {
 public:
  // `inference_cpus`: the CPUs ModelInfer's threads are bound to (see
  // cpu_affinity.h); empty for none.
  InferenceService(engine::ModelManager* models, std::vector<int> inference_cpus)
      : models_(models), inference_cpus_(std::move(inference_cpus)) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override;
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override;
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override;
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override;
  // Each in a file of its own: model_statistics_rpc.cc, model_config_rpc.cc,
  // repository_rpcs.cc, stream_infer.cc.
  grpc::Status ModelStatistics(grpc::ServerContext* context,
                               const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override;
  grpc::Status ModelConfig(grpc::ServerContext* context,
                           const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override;
  grpc::Status RepositoryIndex(grpc::ServerContext* context,
                               const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override;
  grpc::Status RepositoryModelLoad(grpc::ServerContext* context,
                                   const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse*) override;
  grpc::Status RepositoryModelUnload(grpc::ServerContext* context,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse*) override;
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
          stream) override;

  // ModelInfer's work, for the sync method above and the spinning loop's
  // async one (infer_spin_loop.h). `done` gets the call's status once
  // `response` is filled: on this thread, or for a model with dynamic
  // batching on its batcher's; `request` and `response` must live till then.
  // A call whose `deadline` passes before its model runs (waiting for a
  // worker or for its shape's compile) is answered DEADLINE_EXCEEDED without
  // running; a compile it started goes on and is kept. `arrived_ns`
  // (SteadyNowNs; 0: now) is when the call came, for its queue time in the
  // model's statistics: a caller that held it first (the spin loop's
  // workers' queue) says so.
  using InferDone = std::function<void(const grpc::Status&)>;
  void StartInfer(const inference::ModelInferRequest& request,
                  inference::ModelInferResponse* response, InferDone done,
                  absl::Time deadline = absl::InfiniteFuture(), int64_t arrived_ns = 0);

  // Whether StartInfer would return within about `budget_ns`: the model
  // (its variant for the request's shapes) is compiled and its last run
  // took no longer, or it only queues the request for its batcher. What
  // lets the polling thread answer small calls itself and hand long ones
  // (a first-use compile, a large model) to workers, so they do not hold
  // up the calls behind them.
  bool AnswersQuickly(const inference::ModelInferRequest& request, int64_t budget_ns) const;

  // The repository the Repository* RPCs load from (--model-repository;
  // empty: none), the service that compiles its models, and the model
  // control mode (RepositoryModelLoad/Unload only in explicit mode). Before
  // the server starts.
  void set_repository(std::string dir, CompilerService* compiler, ModelControlMode mode) {
    repository_ = std::move(dir);
    compiler_ = compiler;
    model_control_ = mode;
  }

  // What ServerReady answers (and the health service follows): false
  // until the server has started, and again from the start of shutdown.
  void set_ready(bool ready) { ready_.store(ready); }

  // Calls must carry a token of `tokens` (null: none needed). Before the
  // server starts.
  void set_tokens(std::shared_ptr<const TokenTable> tokens) { tokens_ = std::move(tokens); }
  const TokenTable* tokens() const { return tokens_.get(); }

 protected:
  // For AsyncInferenceService, whose generated base constructs this one
  // without arguments.
  InferenceService() = default;
  void Init(engine::ModelManager* models, std::vector<int> inference_cpus) {
    models_ = models;
    inference_cpus_ = std::move(inference_cpus);
  }

 private:
  // A call's statistics as it runs (engine/inference_statistics.h).
  struct CallTimes {
    int64_t arrived_ns = 0;  // SteadyNowNs
    engine::RequestTimes times;
  };

  // With a model store, loads or drops `name` as the store says
  // (CompilerService::ResolveFromStore).
  absl::Status FromStore(const std::string& name, absl::Time deadline);
  // Fills the response's header and outputs.
  static absl::Status Answer(const Program& program, const inference::ModelInferRequest& request,
                             runtime::RunResult result, inference::ModelInferResponse* response);
  // The request's inputs for `program`, at `shapes` (the signature's order)
  // when given, else at the program's own.
  static absl::StatusOr<std::vector<runtime::Tensor>> DecodeAtShapes(
      const Program& program, const ModelSignature& signature,
      const std::vector<std::vector<int64_t>>* shapes,
      const inference::ModelInferRequest& request);
  // Decodes, runs `model` (padded to `padded_rows` rows when > 0: a batch
  // size not compiled yet, served from a larger one), answers, records.
  // `times` (the call's statistics) gets the phases' times.
  void RunAndAnswer(const engine::ServedModel& served, runtime::CompiledModel& model,
                    int64_t padded_rows, const std::vector<std::vector<int64_t>>* shapes,
                    const inference::ModelInferRequest& request,
                    inference::ModelInferResponse* response, InferDone done,
                    absl::Time deadline, CallTimes* times);
  // `done` that first records the call in the model's statistics (what
  // ModelStatistics answers), from `times` as the call filled it.
  InferDone Recorded(const engine::ServedModel& served, std::shared_ptr<CallTimes> times,
                     InferDone done);
  // StartInfer for a model with dynamic batching: decode, queue, answer
  // from the batcher's thread. `shapes` in the signature's order, checked.
  void SubmitToBatcher(const engine::ServedModel& served,
                       const std::vector<std::vector<int64_t>>& shapes,
                       const inference::ModelInferRequest& request,
                       inference::ModelInferResponse* response, InferDone done,
                       CallTimes* times);

  std::shared_ptr<const TokenTable> tokens_;
  engine::ModelManager* models_ = nullptr;
  std::atomic<bool> ready_{false};
  // OK unless the model control mode refuses repository loads and unloads.
  absl::Status CheckModelControl(const char* rpc) const;

  std::string repository_;
  ModelControlMode model_control_ = ModelControlMode::kNone;
  CompilerService* compiler_ = nullptr;
  // Names RepositoryModelUnload unloaded and nothing loaded since:
  // RepositoryIndex lists them UNAVAILABLE, "unloaded", as Triton does.
  absl::Mutex unloaded_mutex_;
  std::set<std::string> unloaded_ ABSL_GUARDED_BY(unloaded_mutex_);
  std::vector<int> inference_cpus_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_INFERENCE_SERVICE_H_
