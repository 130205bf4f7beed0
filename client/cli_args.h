// A parsed command line as the commands of `kiln` and the bench tools read
// it (client/cli_app.h fills it from CLI11), and how a failed call is reported.
#ifndef KILN_CLIENT_CLI_ARGS_H_
#define KILN_CLIENT_CLI_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::client {

struct CliArgs {
  std::vector<std::string> positional;  // the command first
  std::multimap<std::string, std::string> flags;
  std::set<std::string> switches;

  bool Has(const std::string& name) const { return switches.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  // The last value of `name` as an integer, or `fallback` when not given;
  // InvalidArgument when it is not an integer >= `min`.
  absl::StatusOr<int> GetInt(const std::string& name, int fallback, int min) const;
};

// Prints "<program>: <CODE>: <message>" to stderr and returns 1, the exit
// status of a call that failed.
int PrintFailure(absl::string_view program, const absl::Status& status);

}  // namespace kiln::client

#endif  // KILN_CLIENT_CLI_ARGS_H_
