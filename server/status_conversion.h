// The one bridge from absl::Status to grpc::Status.
#ifndef KILN_SERVER_STATUS_CONVERSION_H_
#define KILN_SERVER_STATUS_CONVERSION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/log.h"
#include "grpcpp/support/status.h"

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// How an RPC handler fails: the error logged (FailureLogLine, with `model`
// and the client's `request_id` when the call names them; rate-limited per RPC and code, a
// "suppressed N" line saying what was held back), and returned as the grpc::Status the client sees.
grpc::Status Fail(const char* rpc, const absl::Status& status, absl::string_view model = {},
                  absl::string_view request_id = {});

// The logged message of a failed call, "RPC: CODE: message". It carries
// client text (model and input names); kiln::Log escapes it.
std::string FailureLogLine(const char* rpc, const absl::Status& status);

// Warning for what a client can cause, error for the server's own faults.
LogLevel FailureLogLevel(absl::StatusCode code);

}  // namespace kiln::server

#endif  // KILN_SERVER_STATUS_CONVERSION_H_
