#include "server/call_auth.h"

#include <optional>

#include "absl/time/clock.h"
#include "server/status_conversion.h"

namespace kiln::server {

grpc::Status Authorize(const TokenTable* tokens, const grpc::ServerContext& context, Scope needed,
                       const char* rpc) {
  if (tokens == nullptr) return grpc::Status::OK;
  std::optional<absl::string_view> authorization;
  auto it = context.client_metadata().find("authorization");
  if (it != context.client_metadata().end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::Status allowed = tokens->Check(authorization, needed, absl::Now());
  if (allowed.ok()) return grpc::Status::OK;
  return Fail(rpc, allowed);
}

}  // namespace kiln::server
