#include "client/did_you_mean.h"

#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(DidYouMeanTest, TyposFindTheirWord) {
  const std::vector<std::string> flags = {"input-shape", "input", "name", "opt-level"};
  EXPECT_EQ(ClosestMatch("input-shap", flags), "input-shape");  // a deletion
  EXPECT_EQ(ClosestMatch("inptu", flags), "input");             // a transposition (2 edits)
  EXPECT_EQ(ClosestMatch("nmae", flags), "name");
  EXPECT_EQ(ClosestMatch("opt_level", flags), "opt-level");
}

TEST(DidYouMeanTest, NothingCloseMeansNoSuggestion) {
  const std::vector<std::string> inputs = {"input", "attention_mask"};
  EXPECT_EQ(ClosestMatch("concurrency", inputs), "");
  EXPECT_EQ(ClosestMatch("x", {"y"}), "");  // every character replaced
  EXPECT_EQ(ClosestMatch("ab", {"xy"}), "");
  EXPECT_EQ(ClosestMatch("anything", {}), "");
}

TEST(DidYouMeanTest, ShortWordsAllowOneEdit) {
  EXPECT_EQ(ClosestMatch("xy", {"x"}), "x");
  EXPECT_EQ(ClosestMatch("abc", {"axy"}), "");
}

TEST(DidYouMeanTest, MessageQuotesTheMatchWithItsPrefix) {
  EXPECT_EQ(DidYouMean("jsn", {"json"}, "--"), " (did you mean '--json'?)");
  EXPECT_EQ(DidYouMean("zzzz", {"json"}), "");
}

}  // namespace
}  // namespace kiln::client
