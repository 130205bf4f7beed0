#include "server/http/http_status.h"

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(HttpStatusTest, EachGrpcCodeHasTheStatusKServeClientsExpect) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kDeadlineExceeded), 504);
}

}  // namespace
}  // namespace kiln::server
