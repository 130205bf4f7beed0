// kiln's command line as NewKilnCli declares it, parsed in process: what each
// command receives, both flag spellings, and the errors and help it prints.
#include "client/cli_app.h"

#include <string>
#include <vector>

#include "client/kiln_cli.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

struct Parsed {
  std::optional<int> exit;
  CliArgs args;
  std::string out, err;
};

Parsed ParseKiln(std::vector<std::string> words) {
  words.insert(words.begin(), "kiln");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  std::unique_ptr<CLI::App> cli = NewKilnCli();
  Parsed p;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  p.exit = ParseCommandLine(*cli, static_cast<int>(argv.size()), argv.data(), &p.args);
  p.err = ::testing::internal::GetCapturedStderr();
  p.out = ::testing::internal::GetCapturedStdout();
  return p;
}

TEST(CliAppTest, CommandGetsPositionalsRepeatsLastValuesAndSwitches) {
  Parsed p = ParseKiln({"compile", "m.pbtxt", "--disable", "FuseOps", "--disable=FoldConstant",
                        "--json", "--opt-level=3", "--opt-level", "2", "--server", "h:1"});
  ASSERT_FALSE(p.exit.has_value()) << p.err;
  EXPECT_THAT(p.args.positional, ElementsAre("compile", "m.pbtxt"));
  EXPECT_THAT(p.args.GetAll("disable"), ElementsAre("FuseOps", "FoldConstant"));
  EXPECT_EQ(p.args.Get("opt-level"), "2");
  EXPECT_EQ(p.args.Get("server"), "h:1");
  EXPECT_TRUE(p.args.Has("json"));
  EXPECT_FALSE(p.args.Has("replace"));
}

TEST(CliAppTest, UnderscoresAndDashesAreTheSameFlag) {
  Parsed p = ParseKiln({"compile", "m.onnx", "--input_shape", "a_b=1x3", "--input-shape=c=2",
                        "--max_fuse_depth=4", "--exact_shapes_only"});
  ASSERT_FALSE(p.exit.has_value()) << p.err;
  // The value keeps its underscore: only the flag's name is respelt.
  EXPECT_THAT(p.args.GetAll("input-shape"), ElementsAre("a_b=1x3", "c=2"));
  EXPECT_EQ(p.args.Get("max-fuse-depth"), "4");
  EXPECT_TRUE(p.args.Has("exact-shapes-only"));
}

TEST(CliAppTest, ConnectionFlagsWorkBeforeTheCommandToo) {
  Parsed p = ParseKiln({"--server", "h:2", "models", "--json"});
  ASSERT_FALSE(p.exit.has_value()) << p.err;
  EXPECT_THAT(p.args.positional, ElementsAre("models"));
  EXPECT_EQ(p.args.Get("server"), "h:2");
}

TEST(CliAppTest, UnknownFlagIsAnErrorWithTheClosestFlag) {
  Parsed p = ParseKiln({"compile", "m.onnx", "--input-shap", "a=1"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_THAT(p.err, HasSubstr("unknown flag --input-shap (did you mean '--input-shape'?)"));
  EXPECT_EQ(p.out, "");
}

TEST(CliAppTest, FlagOfAnotherCommandIsUnknownWithoutSuggestionWhenNothingIsClose) {
  Parsed p = ParseKiln({"models", "--concurrency", "3"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_THAT(p.err, HasSubstr("unknown flag --concurrency"));
  EXPECT_THAT(p.err, Not(HasSubstr("did you mean")));
}

TEST(CliAppTest, UnknownCommandIsAnErrorWithTheClosestCommand) {
  Parsed p = ParseKiln({"comple", "m.onnx"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_THAT(p.err, HasSubstr("unknown command 'comple' (did you mean 'compile'?)"));
}

TEST(CliAppTest, ExtraWordIsNamedWhole) {
  Parsed p = ParseKiln({"unload", "my model", "other model"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_THAT(p.err, HasSubstr("unexpected argument 'other model'"));
  Parsed dash = ParseKiln({"models", "-"});
  EXPECT_EQ(dash.exit, 2);
  EXPECT_THAT(dash.err, HasSubstr("unexpected argument '-'"));
}

TEST(CliAppTest, ValueFlagWithoutValueIsAnError) {
  Parsed p = ParseKiln({"infer", "m", "--input"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_THAT(p.err, HasSubstr("--input"));
}

TEST(CliAppTest, PositionalCountsAreChecked) {
  Parsed none = ParseKiln({"infer", "--json"});
  EXPECT_EQ(none.exit, 2);
  EXPECT_THAT(none.err, HasSubstr("NAME is required"));
  Parsed two = ParseKiln({"infer", "a", "b"});
  EXPECT_EQ(two.exit, 2);
  EXPECT_THAT(two.err, HasSubstr("unexpected argument 'b'"));
  Parsed many = ParseKiln({"onnx-test", "c1", "c2", "c3"});
  ASSERT_FALSE(many.exit.has_value()) << many.err;
  EXPECT_THAT(many.args.positional, ElementsAre("onnx-test", "c1", "c2", "c3"));
  Parsed optional = ParseKiln({"bench", "--model", "m"});
  ASSERT_FALSE(optional.exit.has_value()) << optional.err;
  EXPECT_THAT(optional.args.positional, ElementsAre("bench"));
  // The optional FILE, given (CLI11 matched no positional that may take 0
  // values: `kiln bench FILE` was "unexpected argument").
  Parsed given = ParseKiln({"bench", "mlp.onnx", "--concurrency", "16"});
  ASSERT_FALSE(given.exit.has_value()) << given.err;
  EXPECT_THAT(given.args.positional, ElementsAre("bench", "mlp.onnx"));
  Parsed extra = ParseKiln({"bench", "a.onnx", "b.onnx"});
  EXPECT_EQ(extra.exit, 2);
  EXPECT_THAT(extra.err, HasSubstr("unexpected argument 'b.onnx'"));
}

TEST(CliAppTest, CommandHelpGoesToStdoutAndExitsZero) {
  Parsed p = ParseKiln({"infer", "--help"});
  EXPECT_EQ(p.exit, 0);
  EXPECT_THAT(p.out, HasSubstr("Usage: kiln infer"));
  EXPECT_THAT(p.out, HasSubstr("--max-values"));
  EXPECT_THAT(p.out, HasSubstr("Example:\n  kiln infer"));
  EXPECT_THAT(p.out, Not(HasSubstr("--input-shape")));  // compile's, not infer's
  EXPECT_EQ(p.err, "");
}

TEST(CliAppTest, NormalizeFlagSpellingLeavesValuesAndWordsAfterDoubleDash) {
  EXPECT_THAT(NormalizeFlagSpelling({"--a_b=c_d", "e_f", "--g_h", "--", "--i_j"}),
              ElementsAre("--a-b=c_d", "e_f", "--g-h", "--", "--i_j"));
}

}  // namespace
}  // namespace kiln::client
