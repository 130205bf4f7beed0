// The one bridge from absl::Status to grpc::Status.
#ifndef KILN_SERVER_STATUS_CONVERSION_H_
#define KILN_SERVER_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// How an RPC handler fails: the error logged to stderr with the RPC's name,
// and returned as the grpc::Status the client sees.
grpc::Status Fail(const char* rpc, const absl::Status& status);

}  // namespace kiln::server

#endif  // KILN_SERVER_STATUS_CONVERSION_H_
