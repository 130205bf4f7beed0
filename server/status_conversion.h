// The one bridge from absl::Status to grpc::Status.
#ifndef KILN_SERVER_STATUS_CONVERSION_H_
#define KILN_SERVER_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace kiln::server

#endif  // KILN_SERVER_STATUS_CONVERSION_H_
