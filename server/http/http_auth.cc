#include "server/http/http_auth.h"

#include <optional>
#include <string>

#include "absl/time/clock.h"

namespace kiln::server {

absl::Status CheckBearer(const TokenTable* tokens, const httplib::Request& request, Scope needed) {
  if (tokens == nullptr) return absl::OkStatus();
  std::optional<std::string> header;
  if (request.has_header("Authorization")) header = request.get_header_value("Authorization");
  return tokens->Check(header ? std::optional<absl::string_view>(*header) : std::nullopt, needed,
                       absl::Now());
}

}  // namespace kiln::server
