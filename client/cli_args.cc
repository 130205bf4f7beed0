#include "client/cli_args.h"

#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::client {

std::string CliArgs::Get(const std::string& name, const std::string& fallback) const {
  std::string value = fallback;
  auto range = flags.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) value = it->second;
  return value;
}

std::vector<std::string> CliArgs::GetAll(const std::string& name) const {
  std::vector<std::string> values;
  auto range = flags.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) values.push_back(it->second);
  return values;
}

absl::StatusOr<int> CliArgs::GetInt(const std::string& name, int fallback, int min) const {
  if (flags.count(name) == 0) return fallback;
  const std::string text = Get(name);
  int v;
  if (!absl::SimpleAtoi(text, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " takes an integer >= ", min, ", got '", text, "'"));
  }
  return v;
}

int PrintFailure(absl::string_view program, const absl::Status& status) {
  std::cerr << program << ": " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return 1;
}

}  // namespace kiln::client
