#include "server/token_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTokens[] = R"(# comment line
infer-only-token-000001 infer
admin-token-00000000002 admin   # admin may infer too
both-token-000000000003 infer,admin expires=2000000000
old-token-0000000000004 infer expires=1000000000
)";

TEST(TokenTableTest, ChecksPresenceTokenScopeAndExpiry) {
  auto table = TokenTable::Parse(kTokens);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->size(), 4);
  const absl::Time now = absl::FromUnixSeconds(1500000000);
  auto check = [&](std::optional<absl::string_view> header, Scope scope) {
    return (*table)->Check(header, scope, now).code();
  };
  EXPECT_EQ(check(std::nullopt, Scope::kInfer), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(check("Bearer infer-only-token-000001", Scope::kInfer), absl::StatusCode::kOk);
  EXPECT_EQ(check("Bearer infer-only-token-000001", Scope::kAdmin),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(check("Bearer admin-token-00000000002", Scope::kAdmin), absl::StatusCode::kOk);
  EXPECT_EQ(check("Bearer admin-token-00000000002", Scope::kInfer), absl::StatusCode::kOk);
  EXPECT_EQ(check("Bearer both-token-000000000003", Scope::kAdmin), absl::StatusCode::kOk);
  EXPECT_EQ(check("Bearer old-token-0000000000004", Scope::kInfer),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(check("Bearer infer-only-token-00000", Scope::kInfer),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(check("infer-only-token-000001", Scope::kInfer), absl::StatusCode::kUnauthenticated);
  // After its expiry even the good token of 2033 fails.
  EXPECT_EQ((*table)->Check("Bearer both-token-000000000003", Scope::kInfer,
                            absl::FromUnixSeconds(2000000001))
                .code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TokenTableTest, MalformedFilesAreInvalidArgumentWithoutEchoingTheToken) {
  for (const char* text : {"short infer\n", "a-long-enough-token-1 writer\n",
                           "a-long-enough-token-1\n", "a-long-enough-token-1 infer expires=soon\n",
                           "# only a comment\n", ""}) {
    SCOPED_TRACE(text);
    auto table = TokenTable::Parse(text);
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr("a-long-enough-token-1")));
  }
}

}  // namespace
}  // namespace kiln::server
