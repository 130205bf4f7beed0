// An HTTP request's bearer token check: the HTTP side of call_auth.h, with
// the same token table and scopes.
#ifndef KILN_SERVER_HTTP_HTTP_AUTH_H_
#define KILN_SERVER_HTTP_HTTP_AUTH_H_

#include "absl/status/status.h"
#include "httplib.h"
#include "server/token_table.h"

namespace kiln::server {

// OK when `tokens` is null (no --auth-tokens) or the Authorization header's
// bearer token has `needed`; else Unauthenticated or PermissionDenied.
absl::Status CheckBearer(const TokenTable* tokens, const httplib::Request& request, Scope needed);

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_HTTP_AUTH_H_
