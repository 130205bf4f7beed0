// kiln-server flags, logging: the server log on stderr (formats and fields in
// README.md). One file per group: --help lists each file's flags under its
// name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, log_format, "text",
          "stderr's lines: text (TIME LEVEL COMPONENT [key=\"value\" ...] MESSAGE) or json "
          "(one object a line: timestamp, level, component, model, request_id, suppressed, "
          "message; README.md)");
ABSL_FLAG(std::string, log_level, "info",
          "lowest level logged: debug, info, warning (failed calls a client caused) or error");
