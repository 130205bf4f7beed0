// The KServe v2 / Triton inference protocol over Kiln's models.
#ifndef KILN_SERVER_INFERENCE_SERVICE_H_
#define KILN_SERVER_INFERENCE_SERVICE_H_

#include <vector>

#include "proto/grpc_service.grpc.pb.h"
#include "engine/model_manager.h"

namespace kiln::server {

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

  // ModelInfer's work, for the sync method above and the spinning loop's
  // async one (infer_spin_loop.h).
  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response);

 protected:
  // For AsyncInferenceService, whose generated base constructs this one
  // without arguments.
  InferenceService() = default;
  void Init(engine::ModelManager* models, std::vector<int> inference_cpus) {
    models_ = models;
    inference_cpus_ = std::move(inference_cpus);
  }

 private:
  engine::ModelManager* models_ = nullptr;
  std::vector<int> inference_cpus_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_INFERENCE_SERVICE_H_
