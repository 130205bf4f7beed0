#include "client/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(CliArgsTest, AcceptsBothFlagFormsAndRepeats) {
  auto a = ParseCliArgs({"compile", "m.pbtxt", "--disable", "FuseOps", "--disable=FoldConstant",
                         "--json", "--opt-level=3"},
                        {"disable", "opt-level"}, {"json"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->positional, ::testing::ElementsAre("compile", "m.pbtxt"));
  EXPECT_THAT(a->GetAll("disable"), ::testing::ElementsAre("FuseOps", "FoldConstant"));
  EXPECT_EQ(a->Get("opt-level"), "3");
  EXPECT_TRUE(a->Has("json"));
  EXPECT_EQ(a->Get("server", "localhost:50051"), "localhost:50051");
}

TEST(CliArgsTest, UnknownFlagIsInvalidArgument) {
  EXPECT_EQ(ParseCliArgs({"info", "--bogus"}, {}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CliArgsTest, ValueFlagWithoutValueIsInvalidArgument) {
  EXPECT_EQ(ParseCliArgs({"infer", "--input"}, {"input"}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::client
