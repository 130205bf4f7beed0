// Bearer tokens and what they may do (kiln-server --auth-tokens FILE).
//
// The file holds one token a line: "TOKEN SCOPE[,SCOPE] [expires=UNIX_SECONDS]",
// '#' starting a comment. Scopes: `infer` (inference, model metadata and
// readiness, server metadata, model lists and timing) and `admin` (compile,
// unload, kernels, benchmarks, cache; an admin token may also infer).
// Only the tokens' SHA-256 digests are kept, compared in constant time, and
// no token is ever logged or echoed in an error.
#ifndef KILN_SERVER_TOKEN_TABLE_H_
#define KILN_SERVER_TOKEN_TABLE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln::server {

enum class Scope { kInfer, kAdmin };

class TokenTable {
 public:
  // InvalidArgument naming the line for anything malformed, or a file
  // with no token.
  static absl::StatusOr<std::shared_ptr<const TokenTable>> Parse(absl::string_view text);
  static absl::StatusOr<std::shared_ptr<const TokenTable>> Load(const std::string& path);

  // `authorization`: the call's "authorization" metadata, if any ("Bearer
  // TOKEN"). Unauthenticated when missing, malformed, unknown or expired;
  // PermissionDenied when the token lacks `needed`.
  absl::Status Check(std::optional<absl::string_view> authorization, Scope needed,
                     absl::Time now) const;

  int size() const { return static_cast<int>(entries_.size()); }

 private:
  struct Entry {
    std::string digest;  // SHA-256 of the token
    bool infer = false;
    bool admin = false;
    absl::Time expires = absl::InfiniteFuture();
  };
  std::vector<Entry> entries_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_TOKEN_TABLE_H_
