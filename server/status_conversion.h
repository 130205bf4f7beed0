// The one bridge from absl::Status to grpc::Status.
#ifndef KILN_SERVER_STATUS_CONVERSION_H_
#define KILN_SERVER_STATUS_CONVERSION_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// How an RPC handler fails: the error logged to stderr with the RPC's name
// (FailureLogLine), and returned as the grpc::Status the client sees.
grpc::Status Fail(const char* rpc, const absl::Status& status);

// The log line for a failed call: one line whatever the message holds.
// Messages carry client text (model and input names), so control bytes and
// non-ASCII are escaped (\n, \xe2...) and a long message is cut: a model
// name with a newline or an RTL override no longer forges log lines.
std::string FailureLogLine(const char* rpc, const absl::Status& status);

}  // namespace kiln::server

#endif  // KILN_SERVER_STATUS_CONVERSION_H_
