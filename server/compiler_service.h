// Kiln's own service: compile, cache and timing queries, server facts.
#ifndef KILN_SERVER_COMPILER_SERVICE_H_
#define KILN_SERVER_COMPILER_SERVICE_H_

#include "proto/kiln_service.grpc.pb.h"
#include "runtime/model_manager.h"

namespace kiln::server {

class CompilerService final : public kiln::v1::Compiler::Service {
 public:
  explicit CompilerService(runtime::ModelManager* models) : models_(models) {}

  grpc::Status CompileModel(grpc::ServerContext*, const kiln::v1::CompileModelRequest* request,
                            kiln::v1::CompileModelResponse* response) override;
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

 private:
  runtime::ModelManager* models_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_COMPILER_SERVICE_H_
