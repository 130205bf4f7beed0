// Kiln's log: one line per event on stderr, with a UTC timestamp, a level, the
// component that speaks, optional context (model, request id, how many like
// lines were suppressed) and the message; as text or as one JSON object.
#ifndef KILN_COMMON_LOG_H_
#define KILN_COMMON_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// "debug", "info", "warning" (or "warn"), "error"; else InvalidArgument.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// "text" or "json"; else InvalidArgument.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

// Process-wide settings, set once by main() before threads start logging.
void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Whether a line at `level` would be written (to skip building it).
bool LogEnabled(LogLevel level);

// Context of a line. Empty strings and a negative `suppressed` are left out.
struct LogContext {
  absl::string_view model;
  absl::string_view request_id;
  int64_t suppressed = -1;
};

// Writes one line to stderr (one write(2), so concurrent lines do not mix)
// when `level` passes the threshold. `message`, `model` and `request_id` may
// hold client text: they are escaped (see EscapeLogText) and cut.
void Log(LogLevel level, absl::string_view component, absl::string_view message,
         const LogContext& context = {});

// The line Log writes, without its newline; for tests.
std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view message,
                          const LogContext& context);

// `text` as printable ASCII on one line: \n, \r, \t, \\ and \" spelled so,
// other control bytes and every byte past 0x7e as \xNN; then cut at
// `max_bytes` of input with "... (N bytes)". A newline or a bidi override in
// a model name cannot forge or hide a line.
std::string EscapeLogText(absl::string_view text, size_t max_bytes);

}  // namespace kiln

#endif  // KILN_COMMON_LOG_H_
