#include "server/status_conversion.h"

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

}  // namespace
}  // namespace kiln::server
