#include "server/status_conversion.h"

#include "server/log_limiter.h"

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(StatusConversionTest, KeepsCodeAndMessage) {
  grpc::Status s = ToGrpcStatus(absl::ResourceExhaustedError("over --max-models"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "over --max-models");
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::UnimplementedError("x")).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

// The message names the RPC and the code; kiln::Log escapes it (log_test).
TEST(StatusConversionTest, TheFailureLineNamesTheRpcAndTheCode) {
  EXPECT_EQ(FailureLogLine("ModelInfer", absl::NotFoundError("unknown model 'a'")),
            "ModelInfer: NOT_FOUND: unknown model 'a'");
  EXPECT_EQ(FailureLogLevel(absl::StatusCode::kNotFound), LogLevel::kWarning);
  EXPECT_EQ(FailureLogLevel(absl::StatusCode::kInternal), LogLevel::kError);
}

TEST(StatusConversionTest, AFailedCallIsLoggedEscapedWithItsModel) {
  ::testing::internal::CaptureStderr();
  Fail("EscapeRpc", absl::NotFoundError("unknown model 'a\nkiln-server: forged'"), "a\nb");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(" WARNING server model=\"a\\nb\" EscapeRpc: NOT_FOUND: unknown model "
                     "'a\\nkiln-server: forged'\n"),
            std::string::npos)
      << log;
}

// A flood of one kind of failure is limited on its own: another RPC's
// failure in the same second is still logged.
TEST(StatusConversionTest, FailureLogsAreLimitedPerCause) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) Fail("FloodRpc", absl::InvalidArgumentError("same again"));
  Fail("OtherRpc", absl::InternalError("the rare one"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t flood_lines = 0;
  for (size_t at = log.find("FloodRpc: INVALID_ARGUMENT: same again"); at != std::string::npos;
       at = log.find("FloodRpc: INVALID_ARGUMENT: same again", at + 1)) {
    ++flood_lines;
  }
  EXPECT_GE(flood_lines, 1u);
  EXPECT_LE(flood_lines, 20u);  // 10 a second; the loop may straddle a second
  EXPECT_NE(log.find("OtherRpc: INTERNAL: the rare one"), std::string::npos);
}

TEST(LogLimiterTest, AdmitsUpToTheLimitPerSecondAndCountsTheRest) {
  LogLimiter limiter(3);
  int64_t suppressed = -1;
  const int64_t second = 1'000'000'000;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.Admit(100 + i, &suppressed));
    EXPECT_EQ(suppressed, 0);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.Admit(200 + i, &suppressed));
  // The next window admits again and reports the five held back, once.
  EXPECT_TRUE(limiter.Admit(100 + second, &suppressed));
  EXPECT_EQ(suppressed, 5);
  EXPECT_TRUE(limiter.Admit(101 + second, &suppressed));
  EXPECT_EQ(suppressed, 0);
}

}  // namespace
}  // namespace kiln::server
