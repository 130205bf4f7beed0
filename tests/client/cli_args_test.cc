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

TEST(CliArgsTest, GetIntTakesTheLastValueAndChecksItsRange) {
  auto a = ParseCliArgs({"--batch", "2", "--batch=8", "--warmup", "-1", "--top", "x"},
                        {"batch", "warmup", "top"}, {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->GetInt("batch", 1, 1), 8);
  EXPECT_EQ(*a->GetInt("iterations", 100, 1), 100);  // not given: the fallback
  EXPECT_EQ(a->GetInt("warmup", 10, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a->GetInt("top", 0, 0).status().message()),
              ::testing::HasSubstr("'x'"));
}

TEST(CliArgsTest, MainArgumentsSkipTheProgramName) {
  char program[] = "kiln-bench", model[] = "m.onnx", flag[] = "--json";
  char* argv[] = {program, model, flag};
  auto a = ParseCliArgs(3, argv, {}, {"json"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->positional, ::testing::ElementsAre("m.onnx"));
  EXPECT_TRUE(a->Has("json"));
}

}  // namespace
}  // namespace kiln::client
