#include "common/log.h"

#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kiln {
namespace {

const absl::Time kTime = absl::FromUnixMicros(1'795'659'120'123'456);  // 2026-11-26T02:12:00Z

TEST(LogTest, TextLineHasTimeLevelComponentContextAndMessage) {
  LogContext context;
  context.model = "mlp";
  context.request_id = "r1";
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarning, "server",
                          "ModelInfer: NOT_FOUND: gone", context),
            "2026-11-26T02:12:00.123456Z WARNING server model=\"mlp\" request_id=\"r1\" "
            "ModelInfer: NOT_FOUND: gone");
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTime, LogLevel::kInfo, "repository", "up", {}),
            "2026-11-26T02:12:00.123456Z INFO repository up");
}

TEST(LogTest, JsonLineParsesToTheSameFields) {
  LogContext context;
  context.model = "a\n\"b\"";
  context.suppressed = 7;
  const std::string line = FormatLogLine(LogFormat::kJson, kTime, LogLevel::kError, "http",
                                         "msg with \\ and \x01", context);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["timestamp"], "2026-11-26T02:12:00.123456Z");
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["component"], "http");
  EXPECT_EQ(j["model"], "a\\n\\\"b\\\"");
  EXPECT_EQ(j["suppressed"], 7);
  EXPECT_EQ(j["message"], "msg with \\\\ and \\x01");
  EXPECT_FALSE(j.contains("request_id"));
}

// Carried over from the server's failure line: a model name with a newline
// or an RTL override cannot forge a line, and a long message is cut.
TEST(LogTest, ClientTextStaysOnOneAsciiLine) {
  const std::string line = FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarning, "server",
                                         "unknown model 'a\nkiln-server: forged\xe2\x80\xae'", {});
  EXPECT_EQ(line.substr(28),
            "WARNING server unknown model 'a\\nkiln-server: forged\\xe2\\x80\\xae'");
  const std::string long_line = FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarning, "server",
                                              std::string(10240, 'n'), {});
  EXPECT_LT(long_line.size(), 1200u);
  EXPECT_NE(long_line.find("(10240 bytes)"), std::string::npos);
}

TEST(LogTest, LevelsAndFormatsParseAndFilter) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("WARNING"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml").ok());
  SetLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  ::testing::internal::CaptureStderr();
  Log(LogLevel::kInfo, "t", "hidden");
  Log(LogLevel::kWarning, "t", "shown");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find(" WARNING t shown\n"), std::string::npos);
  SetLogLevel(LogLevel::kInfo);
}

}  // namespace
}  // namespace kiln
