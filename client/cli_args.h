// Command-line parsing for `kiln`: a command, positional words, and flags in
// `--name value` or `--name=value` form (boolean flags take no value).
#ifndef KILN_CLIENT_CLI_ARGS_H_
#define KILN_CLIENT_CLI_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::client {

struct CliArgs {
  std::vector<std::string> positional;  // the command first
  std::multimap<std::string, std::string> flags;
  std::set<std::string> switches;

  bool Has(const std::string& name) const { return switches.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
};

// InvalidArgument for a value flag with no value or an unknown flag.
absl::StatusOr<CliArgs> ParseCliArgs(const std::vector<std::string>& args,
                                     const std::set<std::string>& value_flags,
                                     const std::set<std::string>& boolean_flags);

}  // namespace kiln::client

#endif  // KILN_CLIENT_CLI_ARGS_H_
