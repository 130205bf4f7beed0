// gRPC's sync handlers answer a request whose bytes do not parse as the
// method's message with INTERNAL and an empty message, though the fault is
// the client's (issue 20). This interceptor sees the failed parse (the
// received message is missing) and turns the status about to be sent into
// INVALID_ARGUMENT naming the method. Async methods the server parses
// itself (ModelInfer on the spin loop) are left alone.
#ifndef KILN_SERVER_UNPARSED_REQUEST_STATUS_H_
#define KILN_SERVER_UNPARSED_REQUEST_STATUS_H_

#include <memory>
#include <set>
#include <string>

#include "grpcpp/support/server_interceptor.h"

namespace kiln::server {

// For grpc::ServerBuilder::experimental().SetInterceptorCreators; no
// interceptor for the methods (full names, "/package.Service/Method") in
// `parsed_by_the_server`.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
UnparsedRequestStatusFactory(std::set<std::string> parsed_by_the_server);

}  // namespace kiln::server

#endif  // KILN_SERVER_UNPARSED_REQUEST_STATUS_H_
