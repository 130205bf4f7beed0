#include "server/version_policy.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace kiln::server {
namespace {

using google::protobuf::io::Tokenizer;

// Collects the tokenizer's first complaint, with its line, for the reason.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// The top-level `version_policy` field of a config in protobuf text format,
// re-spelled from its tokens; "" when there is none. Triton's configs hold
// fields Kiln's schema lacks, often in list form (`instance_group [ ... ]`),
// which protobuf's parser cannot skip as unknown: so the field is found by
// tokens, tracking nesting, and only it is parsed.
absl::StatusOr<std::string> VersionPolicyText(const std::string& text) {
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  FirstError errors;
  Tokenizer tokenizer(&input, &errors);
  tokenizer.set_comment_style(Tokenizer::SH_COMMENT_STYLE);
  std::vector<std::string> field;
  enum { kSeeking, kInField, kDone } state = kSeeking;
  int depth = 0;
  while (tokenizer.Next()) {
    const Tokenizer::Token& token = tokenizer.current();
    if (state == kSeeking && depth == 0 && token.type == Tokenizer::TYPE_IDENTIFIER &&
        token.text == "version_policy") {
      state = kInField;
    }
    if (token.type == Tokenizer::TYPE_SYMBOL) {
      if (token.text == "{" || token.text == "[" || token.text == "<") ++depth;
      if (token.text == "}" || token.text == "]" || token.text == ">") --depth;
      if (depth < 0) return absl::InvalidArgumentError("unbalanced '" + token.text + "'");
    }
    if (state == kInField) {
      field.push_back(token.text);
      if (depth == 0 && (token.text == "}" || token.text == ">")) state = kDone;
    }
  }
  if (!errors.error().empty()) return absl::InvalidArgumentError(errors.error());
  if (depth != 0) return absl::InvalidArgumentError("a '{' or '[' is never closed");
  return absl::StrJoin(field, " ");
}

}  // namespace

absl::StatusOr<inference::ModelVersionPolicy> ReadVersionPolicy(const std::string& model_dir) {
  inference::ModelVersionPolicy policy;
  policy.mutable_latest()->set_num_versions(1);
  std::ifstream in(model_dir + "/config.pbtxt", std::ios::binary);
  if (!in) return policy;
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::string> field = VersionPolicyText(text.str());
  inference::ModelConfig config;
  if (!field.ok() || !google::protobuf::TextFormat::ParseFromString(*field, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, "/config.pbtxt is not a Triton ModelConfig",
        field.ok() ? " (its version_policy)" : absl::StrCat(": ", field.status().message())));
  }
  if (config.version_policy().policy_choice_case() ==
      inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET) {
    return policy;
  }
  if (config.version_policy().has_latest() && config.version_policy().latest().num_versions() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir,
                                                   "/config.pbtxt: version_policy latest needs "
                                                   "num_versions of 1 or more"));
  }
  return config.version_policy();
}

std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    std::vector<int64_t> out;
    for (int64_t v : available) {
      const auto& wanted = policy.specific().versions();
      if (std::find(wanted.begin(), wanted.end(), v) != wanted.end()) out.push_back(v);
    }
    return out;
  }
  const size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
  if (available.size() > n) available.erase(available.begin(), available.end() - n);
  return available;
}

std::string DescribePolicy(const inference::ModelVersionPolicy& policy) {
  if (policy.has_all()) return "all";
  if (policy.has_specific()) {
    return absl::StrCat("specific ", absl::StrJoin(policy.specific().versions(), ", "));
  }
  return absl::StrCat("latest ", policy.has_latest() ? policy.latest().num_versions() : 1);
}

}  // namespace kiln::server
