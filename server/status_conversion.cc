#include "server/status_conversion.h"

#include <iostream>
#include <string>

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status Fail(const char* rpc, const absl::Status& status) {
  std::cerr << "kiln-server: " << rpc << ": " << status << "\n";
  return ToGrpcStatus(status);
}

}  // namespace kiln::server
