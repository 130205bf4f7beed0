// The HTTP status a failed call answers with on the REST front end: the one
// matching its gRPC code, so both front ends fail alike.
#ifndef KILN_SERVER_HTTP_HTTP_STATUS_H_
#define KILN_SERVER_HTTP_HTTP_STATUS_H_

#include "absl/status/status.h"

namespace kiln::server {

// INVALID_ARGUMENT 400, NOT_FOUND 404, UNAVAILABLE 503, RESOURCE_EXHAUSTED
// 429, UNIMPLEMENTED 501, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// DEADLINE_EXCEEDED 504, ...; OK is 200.
int HttpStatusOf(absl::StatusCode code);

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_HTTP_STATUS_H_
