#include "client/cli_args.h"

#include <algorithm>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
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

absl::StatusOr<CliArgs> ParseCliArgs(const std::vector<std::string>& args,
                                     const std::set<std::string>& value_flags,
                                     const std::set<std::string>& boolean_flags) {
  CliArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!absl::StartsWith(a, "--") || a == "--") {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (boolean_flags.count(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.switches.insert(name);
      continue;
    }
    if (!value_flags.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    out.flags.emplace(name, value);
  }
  return out;
}

absl::StatusOr<CliArgs> ParseCliArgs(int argc, char** argv,
                                     const std::set<std::string>& value_flags,
                                     const std::set<std::string>& boolean_flags) {
  return ParseCliArgs(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), value_flags,
                      boolean_flags);
}

int PrintFailure(absl::string_view program, const absl::Status& status) {
  std::cerr << program << ": " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return 1;
}

}  // namespace kiln::client
