// Version policies: Triton's selection rules, and config.pbtxt files as
// Triton users write them (list syntax, comments, fields Kiln lacks).
#include "server/version_policy.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

inference::ModelVersionPolicy Policy(const std::string& text) {
  inference::ModelVersionPolicy policy;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &policy)) << text;
  return policy;
}

TEST(VersionPolicyTest, SelectsAsTritonDoes) {
  const std::vector<int64_t> on_disk = {3, 1, 7, 2};
  EXPECT_THAT(SelectVersions(Policy("latest { num_versions: 2 }"), on_disk), ElementsAre(3, 7));
  EXPECT_THAT(SelectVersions(Policy("latest { num_versions: 9 }"), on_disk),
              ElementsAre(1, 2, 3, 7));
  EXPECT_THAT(SelectVersions(Policy("all {}"), on_disk), ElementsAre(1, 2, 3, 7));
  EXPECT_THAT(SelectVersions(Policy("specific { versions: [7, 1, 5] }"), on_disk),
              ElementsAre(1, 7));
  EXPECT_THAT(SelectVersions(Policy(""), on_disk), ElementsAre(7));  // latest 1
  EXPECT_THAT(SelectVersions(Policy("specific { versions: [5] }"), on_disk), IsEmpty());
  EXPECT_EQ(DescribePolicy(Policy("specific { versions: [7, 1] }")), "specific 7, 1");
}

class ReadVersionPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/version_policy_test";
    ASSERT_EQ(std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str()), 0);
  }
  void WriteConfig(const std::string& text) {
    std::ofstream(dir_ + "/config.pbtxt") << text;
  }
  std::string dir_;
};

TEST_F(ReadVersionPolicyTest, NoFileIsLatestOne) {
  absl::StatusOr<inference::ModelVersionPolicy> policy = ReadVersionPolicy(dir_);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->latest().num_versions(), 1u);
}

TEST_F(ReadVersionPolicyTest, ReadsThePolicyAmongFieldsKilnLacks) {
  WriteConfig(R"(name: "add"
platform: "onnxruntime_onnx"
max_batch_size: 0
# a comment with { and [
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 3 ] format: FORMAT_NONE } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "}" } ] } }
version_policy: { specific: { versions: [ 1, 3 ] } }
parameters { key: "k" value: { string_value: "version_policy { all {} }" } }
)");
  absl::StatusOr<inference::ModelVersionPolicy> policy = ReadVersionPolicy(dir_);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_THAT(policy->specific().versions(), ElementsAre(1, 3));
}

TEST_F(ReadVersionPolicyTest, ConfigWithoutAPolicyIsLatestOne) {
  WriteConfig("name: \"add\"\ninstance_group [ { count: 1 } ]\n");
  absl::StatusOr<inference::ModelVersionPolicy> policy = ReadVersionPolicy(dir_);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->latest().num_versions(), 1u);
}

TEST_F(ReadVersionPolicyTest, RefusesLatestZeroABadPolicyAndUnbalancedText) {
  WriteConfig("version_policy { latest { num_versions: 0 } }");
  EXPECT_THAT(std::string(ReadVersionPolicy(dir_).status().message()),
              HasSubstr("num_versions of 1 or more"));
  WriteConfig("version_policy { newest { n: 2 } }");
  EXPECT_EQ(ReadVersionPolicy(dir_).status().code(), absl::StatusCode::kInvalidArgument);
  WriteConfig("instance_group [ { count: 1 }");
  EXPECT_EQ(ReadVersionPolicy(dir_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::server
