// Each RPC's token check: what every handler runs first (gRPC's own auth
// processor cannot be used on a server without TLS, and tokens must work
// there too, e.g. behind a TLS-terminating proxy on loopback).
#ifndef KILN_SERVER_CALL_AUTH_H_
#define KILN_SERVER_CALL_AUTH_H_

#include "grpcpp/server_context.h"
#include "server/token_table.h"

namespace kiln::server {

// OK when `tokens` is null (no --auth-tokens) or the call's bearer token has
// `needed`; otherwise the failure, logged as `rpc`'s.
grpc::Status Authorize(const TokenTable* tokens, const grpc::ServerContext& context, Scope needed,
                       const char* rpc);

}  // namespace kiln::server

#endif  // KILN_SERVER_CALL_AUTH_H_
