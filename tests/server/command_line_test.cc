#include "server/command_line.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CommandLineTest, DashesInFlagNamesBecomeUnderscoresNotInValues) {
  auto words = ExpandCommandLine(
      {"kiln-server", "--cache-dir=/a-b/c-d", "--port", "5", "positional-word", "-x-y"});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(*words, ElementsAre("kiln-server", "--cache_dir=/a-b/c-d", "--port", "5",
                                  "positional-word", "-x-y"));
}

// Abseil keeps a flag's last value; --load-model repeats as Triton's does.
TEST(CommandLineTest, RepeatedLoadModelFlagsAreJoined) {
  auto words = ExpandCommandLine({"kiln-server", "--load-model=a", "--port=1", "--load_model",
                                  "b", "--load-model=c,d"});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(*words, ElementsAre("kiln-server", "--load_model=a,b,c,d", "--port=1"));
}

TEST(CommandLineTest, FlagfilesAreSplicedInPlaceNestedAndCommaSeparated) {
  const std::string inner = TempFile("inner.flags", "--max-models=3\n");
  const std::string second = TempFile("second.flags", "--threads=2\n");
  const std::string outer = TempFile(
      "outer.flags", "# a comment\n\n  --model-repository=/r-1  \n--flagfile=" + inner + "\n");
  auto words = ExpandCommandLine({"kiln-server", "--port=1", "--flagfile=" + outer + "," + second,
                                  "--flagfile", inner, "--address=x"});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(*words,
              ElementsAre("kiln-server", "--port=1", "--model_repository=/r-1", "--max_models=3",
                          "--threads=2", "--max_models=3", "--address=x"));
}

TEST(CommandLineTest, UnreadableAndSelfIncludingFlagfilesAreInvalidArgument) {
  auto missing = ExpandCommandLine({"kiln-server", "--flagfile=/no/such/file"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/no/such/file"));
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/loop.flags";
  std::ofstream(path) << "--flagfile=" << path << "\n";
  auto loop = ExpandCommandLine({"kiln-server", "--flagfile=" + path});
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loop.status().message()), HasSubstr("nested"));
}

TEST(CommandLineTest, HelpCoversTheServersFlagFilesOnly) {
  EXPECT_TRUE(IsServerFlagFile("server/server_main.cc"));
  EXPECT_TRUE(IsServerFlagFile("server/http_server.cc"));
  EXPECT_FALSE(IsServerFlagFile("absl/flags/parse.cc"));
}

}  // namespace
}  // namespace kiln::server
