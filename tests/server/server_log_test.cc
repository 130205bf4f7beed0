// kiln-server's log as an operator reads it, from real server processes: JSON
// lines parsed field by field (nlohmann's parser is the reference), text
// lines, --log-level, the per-cause "suppressed N" summary, client text
// escaped in both formats, and no bearer token ever written.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::ReadFile;
using ::kiln::testing::ServerProcess;
using ::kiln::testing::TestTmpDir;
using ::testing::HasSubstr;
using ::testing::Not;

// A model name a client chose to forge a line, hide text and color a
// terminal: a newline, quotes, a control byte, an escape sequence, a bidi
// override and a backslash.
const std::string kEvilName = "evil\nkiln: forged \"q\" \x01\x1b[31m\xe2\x80\xae\\end";
// The same name as the log must spell it, written out by hand.
constexpr char kEvilEscaped[] = R"(evil\nkiln: forged \"q\" \x01\x1b[31m\xe2\x80\xae\\end)";

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The log's JSON lines (kiln-server writes only those; a line from a library
// would not start with '{'), each parsed; a line that does not parse fails.
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> parsed;
  for (const std::string& line : Lines(text)) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << line;
    if (!j.is_discarded()) parsed.push_back(std::move(j));
  }
  return parsed;
}

grpc::Status Metadata(const ServerProcess& server, const std::string& model,
                      const std::string& token = "") {
  auto stub = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  inference::ModelMetadataRequest request;
  request.set_name(model);
  inference::ModelMetadataResponse response;
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  return stub->ModelMetadata(&ctx, request, &response);
}

grpc::Status Infer(const ServerProcess& server, const std::string& model, const std::string& id) {
  auto stub = inference::GRPCInferenceService::NewStub(ChannelTo(server));
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_id(id);
  inference::ModelInferResponse response;
  grpc::ClientContext ctx;
  return stub->ModelInfer(&ctx, request, &response);
}

class ServerLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTmpDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    repo_ = testing::WriteRepository(root_, {});
    log_ = root_ + "/stderr.log";
  }
  std::string root_, repo_, log_;
};

TEST_F(ServerLogTest, JsonLinesCarryTimestampLevelComponentModelAndMessage) {
  const auto before = std::chrono::system_clock::now();
  std::vector<nlohmann::json> lines;
  {
    ServerProcess server(root_ + "/cache", {"--log-format=json", "--model-repository=" + repo_},
                         log_);
    ASSERT_GT(server.port(), 0);
    EXPECT_EQ(Infer(server, "nope", "req-42").error_code(), grpc::StatusCode::NOT_FOUND);
    lines = JsonLines(ReadFile(log_));
  }
  const nlohmann::json* loaded = nullptr;
  const nlohmann::json* failed = nullptr;
  for (const nlohmann::json& j : lines) {
    const std::string message = j.value("message", "");
    if (message.find("loaded version 1") != std::string::npos) loaded = &j;
    if (message.find("ModelInfer: NOT_FOUND") != std::string::npos) failed = &j;
  }
  ASSERT_NE(loaded, nullptr) << ReadFile(log_);
  ASSERT_NE(failed, nullptr) << ReadFile(log_);
  EXPECT_EQ((*loaded)["level"], "info");
  EXPECT_EQ((*loaded)["component"], "repository");
  EXPECT_EQ((*loaded)["model"], "mlp");
  EXPECT_EQ((*failed)["level"], "warning");
  EXPECT_EQ((*failed)["component"], "server");
  EXPECT_EQ((*failed)["model"], "nope");
  EXPECT_EQ((*failed)["request_id"], "req-42");
  EXPECT_THAT((*failed)["message"].get<std::string>(), HasSubstr("nope"));
  // RFC 3339 in UTC with microseconds, e.g. 2026-11-26T02:12:00.123456Z, and
  // the time the line was written: within this test's run.
  const std::string stamp = (*failed)["timestamp"];
  ASSERT_EQ(stamp.size(), 27u) << stamp;
  EXPECT_EQ(stamp[10], 'T');
  EXPECT_EQ(stamp.back(), 'Z');
  std::tm tm = {};
  ASSERT_NE(::strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << stamp;
  const auto written = std::chrono::system_clock::from_time_t(::timegm(&tm));
  EXPECT_GE(written, std::chrono::time_point_cast<std::chrono::seconds>(before));
  EXPECT_LE(written, std::chrono::system_clock::now());
}

TEST_F(ServerLogTest, TextLinesSayTheSameInOneLine) {
  std::string log;
  {
    ServerProcess server(root_ + "/cache", {"--model-repository=" + repo_}, log_);
    ASSERT_GT(server.port(), 0);
    EXPECT_EQ(Infer(server, "nope", "req-7").error_code(), grpc::StatusCode::NOT_FOUND);
    log = ReadFile(log_);
  }
  bool loaded = false, failed = false;
  for (const std::string& line : Lines(log)) {
    // "2026-11-26T02:12:00.123456Z LEVEL component ..."
    if (line.find(" INFO repository model=\"mlp\" loaded version 1") == 27) loaded = true;
    if (line.find(" WARNING server model=\"nope\" request_id=\"req-7\" ModelInfer: NOT_FOUND") ==
        27) {
      failed = true;
    }
  }
  EXPECT_TRUE(loaded) << log;
  EXPECT_TRUE(failed) << log;
}

TEST_F(ServerLogTest, LogLevelDropsLinesBelowIt) {
  for (const char* level : {"info", "warning", "error"}) {
    SCOPED_TRACE(level);
    std::string log;
    {
      ServerProcess server(root_ + "/cache",
                           {std::string("--log-level=") + level, "--model-repository=" + repo_},
                           log_);
      ASSERT_GT(server.port(), 0);
      EXPECT_EQ(Metadata(server, "nope").error_code(), grpc::StatusCode::NOT_FOUND);
      log = ReadFile(log_);
    }
    const bool info = std::string(level) == "info";
    const bool warning = info || std::string(level) == "warning";
    EXPECT_EQ(log.find("loaded version 1") != std::string::npos, info) << log;
    EXPECT_EQ(log.find("ModelMetadata: NOT_FOUND") != std::string::npos, warning) << log;
  }
}

TEST_F(ServerLogTest, AnUnknownLevelOrFormatIsRefused) {
  for (const char* flag : {"--log-level=verbose", "--log-format=xml"}) {
    ServerProcess server(root_ + "/cache", {flag}, log_);
    EXPECT_EQ(server.port(), 0) << flag;
    EXPECT_TRUE(server.StopWith(SIGTERM, std::chrono::seconds(5)));
    EXPECT_THAT(ReadFile(log_), HasSubstr("--log-format / --log-level")) << flag;
  }
}

// 40 failures in well under a second: 10 are logged, the rest held back,
// and the first failure of the next second says how many with
// "suppressed": every call is accounted for, exactly.
TEST_F(ServerLogTest, AFloodOfOneFailureIsSummarisedWithSuppressedN) {
  constexpr int kFlood = 40;
  std::vector<nlohmann::json> lines;
  {
    ServerProcess server(root_ + "/cache", {"--log-format=json"}, log_);
    ASSERT_GT(server.port(), 0);
    for (int i = 0; i < kFlood; ++i) {
      EXPECT_EQ(Metadata(server, "nope").error_code(), grpc::StatusCode::NOT_FOUND);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    EXPECT_EQ(Metadata(server, "nope").error_code(), grpc::StatusCode::NOT_FOUND);
    lines = JsonLines(ReadFile(log_));
  }
  int logged = 0, suppressed = 0, summaries = 0;
  for (const nlohmann::json& j : lines) {
    const std::string message = j.value("message", "");
    if (message.find("ModelMetadata: NOT_FOUND") != std::string::npos) ++logged;
    if (j.contains("suppressed")) {
      ++summaries;
      suppressed += j["suppressed"].get<int>();
      EXPECT_THAT(message, HasSubstr("suppressed " + std::to_string(j["suppressed"].get<int>())));
      EXPECT_THAT(message, HasSubstr("NOT_FOUND"));
    }
  }
  EXPECT_GE(summaries, 1) << ReadFile(log_);
  EXPECT_GE(suppressed, 1);
  EXPECT_LE(logged, 21);  // 10 a second; the flood may straddle one boundary
  EXPECT_EQ(logged + suppressed, kFlood + 1) << ReadFile(log_);
}

TEST_F(ServerLogTest, AClientsModelNameIsEscapedInBothFormats) {
  for (const char* format : {"text", "json"}) {
    SCOPED_TRACE(format);
    std::string log;
    {
      ServerProcess server(root_ + "/cache", {std::string("--log-format=") + format}, log_);
      ASSERT_GT(server.port(), 0);
      EXPECT_EQ(Infer(server, kEvilName, "id\n\"x\"").error_code(), grpc::StatusCode::NOT_FOUND);
      log = ReadFile(log_);
    }
    // Nothing the client sent starts a line, and no raw control byte or
    // non-ASCII byte is written.
    for (const std::string& line : Lines(log)) {
      EXPECT_THAT(line, Not(::testing::StartsWith("kiln: forged"))) << log;
    }
    for (char c : log) {
      const auto byte = static_cast<unsigned char>(c);
      EXPECT_TRUE(c == '\n' || (byte >= 0x20 && byte <= 0x7e)) << int{byte};
    }
    if (std::string(format) == "text") {
      EXPECT_THAT(log, HasSubstr(std::string("model=\"") + kEvilEscaped + "\""));
      EXPECT_THAT(log, HasSubstr(R"(request_id="id\n\"x\"")"));
    } else {
      bool found = false;
      for (const nlohmann::json& j : JsonLines(log)) {
        if (!j.contains("model")) continue;
        found = true;
        EXPECT_EQ(j["model"], kEvilEscaped);
        EXPECT_EQ(j["request_id"], R"(id\n\"x\")");
      }
      EXPECT_TRUE(found) << log;
    }
  }
}

TEST_F(ServerLogTest, NoBearerTokenIsEverLogged) {
  constexpr char kToken[] = "log-test-token-8c1f2e";
  constexpr char kWrongToken[] = "log-test-wrong-5d7a90";
  testing::WriteFile(root_ + "/tokens", std::string(kToken) + " infer\n");
  for (const char* format : {"text", "json"}) {
    SCOPED_TRACE(format);
    std::string log;
    {
      ServerProcess server(
          root_ + "/cache",
          {std::string("--log-format=") + format, "--auth-tokens=" + root_ + "/tokens",
           "--log-level=debug", "--http-port=0"},
          log_);
      ASSERT_GT(server.port(), 0);
      ASSERT_GT(server.http_port(), 0);
      EXPECT_EQ(Metadata(server, "nope", kWrongToken).error_code(),
                grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_EQ(Metadata(server, "nope", kToken).error_code(), grpc::StatusCode::NOT_FOUND);
      // The same over HTTP, where the token is a header.
      httplib::Client http("127.0.0.1", server.http_port());
      auto wrong =
          http.Get("/v2/models/nope", {{"Authorization", std::string("Bearer ") + kWrongToken}});
      ASSERT_TRUE(wrong);
      EXPECT_EQ(wrong->status, 401);
      auto right =
          http.Get("/v2/models/nope-http", {{"Authorization", std::string("Bearer ") + kToken}});
      ASSERT_TRUE(right);
      EXPECT_EQ(right->status, 404);
      log = ReadFile(log_);
    }
    // Both calls were logged, neither token was.
    EXPECT_THAT(log, HasSubstr("UNAUTHENTICATED"));
    EXPECT_THAT(log, HasSubstr("ModelMetadata: NOT_FOUND"));
    EXPECT_THAT(log, HasSubstr("nope-http"));
    EXPECT_THAT(log, Not(HasSubstr(kToken)));
    EXPECT_THAT(log, Not(HasSubstr(kWrongToken)));
    EXPECT_THAT(log, Not(HasSubstr("log-test-")));
  }
}

}  // namespace
}  // namespace kiln
