// Design note: why a formatter of Kiln's own rather than spdlog or glog.
//
// The server already links Abseil (20220623, which has no absl/log) and
// needs little: a level threshold, two formats, one line per write, and
// escaping of client text. Debian's spdlog brings fmt and its own sinks,
// pattern language and async queues for what is here ~150 lines; glog's
// line format is fixed (no JSON), it installs its own flags (--v,
// --minloglevel) beside Abseil's and a failure handler of its own. So the
// line is built with absl::StrCat / FormatTime and written with one
// write(2) to stderr, as absl's raw logging does: no allocation-free
// promise is needed here, only that lines from concurrent calls never
// interleave (one write of a line up to PIPE_BUF is atomic on a pipe, and
// messages are cut at 1 KiB).
//
//   text: 2026-11-26T02:12:00.123456Z ERROR server model="m\n" ModelInfer: ...
//   json: {"timestamp":"...","level":"error","component":"server","model":"m\\n",
//          "message":"ModelInfer: ..."}
//
// JSON values hold the same escaped, ASCII-only text as the text format, so
// the two formats say exactly the same thing and no value can be invalid
// UTF-8.
#include "common/log.h"

#include <unistd.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

constexpr size_t kMaxMessageBytes = 1024;
constexpr size_t kMaxFieldBytes = 256;

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> log_format{static_cast<int>(LogFormat::kText)};

const char* LevelName(LogLevel level, LogFormat format) {
  switch (level) {
    case LogLevel::kDebug:
      return format == LogFormat::kJson ? "debug" : "DEBUG";
    case LogLevel::kInfo:
      return format == LogFormat::kJson ? "info" : "INFO";
    case LogLevel::kWarning:
      return format == LogFormat::kJson ? "warning" : "WARNING";
    case LogLevel::kError:
      return format == LogFormat::kJson ? "error" : "ERROR";
  }
  return "?";
}

// `ascii` is EscapeLogText's output: printable ASCII, where only '"' and
// '\\' need JSON's escape.
std::string JsonString(absl::string_view ascii) {
  std::string out = "\"";
  for (char c : ascii) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(absl::StrCat("log level '", EscapeLogText(name, 64),
                                                 "' is not debug, info, warning or error"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("log format '", EscapeLogText(name, 64), "' is not text or json"));
}

void SetLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }
void SetLogFormat(LogFormat format) { log_format.store(static_cast<int>(format)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

std::string EscapeLogText(absl::string_view text, size_t max_bytes) {
  std::string out;
  for (char c : text.substr(0, max_bytes)) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        if (byte < 0x20 || byte > 0x7e) {
          absl::StrAppend(&out, "\\x", absl::Hex(byte, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  if (text.size() > max_bytes) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view message,
                          const LogContext& context) {
  const std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone());
  const std::string text = EscapeLogText(message, kMaxMessageBytes);
  if (format == LogFormat::kJson) {
    std::string line =
        absl::StrCat("{\"timestamp\":\"", stamp, "\",\"level\":\"", LevelName(level, format),
                     "\",\"component\":", JsonString(EscapeLogText(component, kMaxFieldBytes)));
    if (!context.model.empty()) {
      absl::StrAppend(&line,
                      ",\"model\":", JsonString(EscapeLogText(context.model, kMaxFieldBytes)));
    }
    if (!context.request_id.empty()) {
      absl::StrAppend(
          &line, ",\"request_id\":", JsonString(EscapeLogText(context.request_id, kMaxFieldBytes)));
    }
    if (context.suppressed >= 0) absl::StrAppend(&line, ",\"suppressed\":", context.suppressed);
    absl::StrAppend(&line, ",\"message\":", JsonString(text), "}");
    return line;
  }
  std::string line = absl::StrCat(stamp, " ", LevelName(level, format), " ",
                                  EscapeLogText(component, kMaxFieldBytes));
  if (!context.model.empty()) {
    absl::StrAppend(&line, " model=\"", EscapeLogText(context.model, kMaxFieldBytes), "\"");
  }
  if (!context.request_id.empty()) {
    absl::StrAppend(&line, " request_id=\"", EscapeLogText(context.request_id, kMaxFieldBytes),
                    "\"");
  }
  if (context.suppressed >= 0) absl::StrAppend(&line, " suppressed=", context.suppressed);
  absl::StrAppend(&line, " ", text);
  return line;
}

void Log(LogLevel level, absl::string_view component, absl::string_view message,
         const LogContext& context) {
  if (!LogEnabled(level)) return;
  std::string line =
      FormatLogLine(static_cast<LogFormat>(log_format.load(std::memory_order_relaxed)), absl::Now(),
                    level, component, message, context);
  line += '\n';
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

}  // namespace kiln
