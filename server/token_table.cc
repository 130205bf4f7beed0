#include "server/token_table.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"

namespace kiln::server {
namespace {

// Equal without an early exit: the time taken does not say how much of a
// guess was right.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TokenTable>> TokenTable::Parse(absl::string_view text) {
  auto table = std::make_shared<TokenTable>();
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto bad = [&](absl::string_view why) {
      // The line's number, never its text: it holds a token.
      return absl::InvalidArgumentError(
          absl::StrCat("auth tokens line ", line_number, ": ", why,
                       " (want TOKEN SCOPE[,SCOPE] [expires=UNIX_SECONDS])"));
    };
    if (fields.size() < 2 || fields.size() > 3) return bad("wrong number of fields");
    if (fields[0].size() < 16) return bad("a token must be at least 16 characters");
    Entry entry;
    entry.digest = Sha256(fields[0]);
    for (absl::string_view scope : absl::StrSplit(fields[1], ',')) {
      if (scope == "infer") {
        entry.infer = true;
      } else if (scope == "admin") {
        entry.admin = entry.infer = true;
      } else {
        return bad(absl::StrCat("unknown scope '", scope, "' (infer, admin)"));
      }
    }
    if (fields.size() == 3) {
      int64_t seconds = 0;
      absl::string_view when = fields[2];
      if (!absl::ConsumePrefix(&when, "expires=") || !absl::SimpleAtoi(when, &seconds)) {
        return bad("the third field must be expires=UNIX_SECONDS");
      }
      entry.expires = absl::FromUnixSeconds(seconds);
    }
    table->entries_.push_back(std::move(entry));
  }
  if (table->entries_.empty()) {
    return absl::InvalidArgumentError("the auth tokens file holds no token");
  }
  return std::shared_ptr<const TokenTable>(std::move(table));
}

absl::StatusOr<std::shared_ptr<const TokenTable>> TokenTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read --auth-tokens ", path));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str());
}

absl::Status TokenTable::Check(std::optional<absl::string_view> authorization, Scope needed,
                               absl::Time now) const {
  if (!authorization) {
    return absl::UnauthenticatedError(
        "this server needs a bearer token: send metadata 'authorization: Bearer TOKEN'");
  }
  absl::string_view token = *authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata is not 'Bearer TOKEN'");
  }
  const std::string digest = Sha256(absl::StripAsciiWhitespace(token));
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {  // every entry compared, found or not
    if (ConstantTimeEqual(e.digest, digest)) found = &e;
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown token");
  if (now >= found->expires) return absl::UnauthenticatedError("the token has expired");
  if (needed == Scope::kAdmin ? !found->admin : !found->infer) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the token lacks the '", needed == Scope::kAdmin ? "admin" : "infer", "' scope"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::server
