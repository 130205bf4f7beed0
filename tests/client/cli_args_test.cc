#include "client/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(CliArgsTest, GetTakesTheLastValueOrTheFallback) {
  CliArgs a;
  a.flags.emplace("server", "a:1");
  a.flags.emplace("server", "b:2");
  EXPECT_EQ(a.Get("server"), "b:2");
  EXPECT_EQ(a.Get("token", "none"), "none");
  EXPECT_THAT(a.GetAll("server"), ::testing::ElementsAre("a:1", "b:2"));
}

TEST(CliArgsTest, GetIntTakesTheLastValueAndChecksItsRange) {
  CliArgs a;
  a.flags = {{"batch", "2"}, {"batch", "8"}, {"warmup", "-1"}, {"top", "x"}};
  EXPECT_EQ(*a.GetInt("batch", 1, 1), 8);
  EXPECT_EQ(*a.GetInt("iterations", 100, 1), 100);  // not given: the fallback
  EXPECT_EQ(a.GetInt("warmup", 10, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.GetInt("top", 0, 0).status().message()), ::testing::HasSubstr("'x'"));
}

}  // namespace
}  // namespace kiln::client
