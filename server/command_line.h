// kiln-server's command line as Abseil is to parse it: each --flagfile
// replaced by the flags its files hold, and every flag's dashes made
// underscores (--cache-dir as well as --cache_dir, on the command line and
// in flag files alike; Abseil's own --flagfile would take only the second).
#ifndef KILN_SERVER_COMMAND_LINE_H_
#define KILN_SERVER_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// `words` is argv (the program name first). A flag file holds one flag per
// line (Abseil's format): blank lines and lines starting with '#' are
// skipped, and it may name further --flagfile's (nested at most 8 deep).
// --flagfile=A,B reads both. InvalidArgument for a file that cannot be read.
absl::StatusOr<std::vector<std::string>> ExpandCommandLine(const std::vector<std::string>& words);

// Whether --help lists the flags defined in `file`: kiln-server's own
// (server/), not every library's that links in (Abseil's default keeps only
// the main file's, which printed "No flags matched").
bool IsServerFlagFile(absl::string_view file);

}  // namespace kiln::server

#endif  // KILN_SERVER_COMMAND_LINE_H_
