#include "server/kserve_datatype.h"

#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

// KServe v2's datatype table, as its protocol document spells it.
const std::pair<DType, std::string> kKServeNames[] = {
    {DType::kBool, "BOOL"},     {DType::kUInt8, "UINT8"},   {DType::kUInt16, "UINT16"},
    {DType::kUInt32, "UINT32"}, {DType::kUInt64, "UINT64"}, {DType::kInt8, "INT8"},
    {DType::kInt16, "INT16"},   {DType::kInt32, "INT32"},   {DType::kInt64, "INT64"},
    {DType::kFloat16, "FP16"},  {DType::kFloat32, "FP32"},  {DType::kFloat64, "FP64"},
    {DType::kBFloat16, "BF16"},
};

TEST(KServeDatatypeTest, NamesEveryDTypeAsKServeDoes) {
  for (const auto& [dtype, name] : kKServeNames) {
    EXPECT_EQ(DatatypeName(dtype), name);
    absl::StatusOr<DType> back = DTypeFromDatatype(name, "input 'x'");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(*back, dtype) << name;
  }
  std::set<std::string> names;
  for (DType dtype : kAllDTypes) names.insert(DatatypeName(dtype));
  EXPECT_EQ(names.size(), std::size(kAllDTypes));
  EXPECT_EQ(names.count("?"), 0u);
}

TEST(KServeDatatypeTest, UnknownNameIsInvalidArgumentNamingTensorAndDatatype) {
  for (const std::string name : {"FLOAT", "fp32", "", "FP8"}) {
    absl::Status s = DTypeFromDatatype(name, "input 'pixels'").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("input 'pixels'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("'" + name + "'"));
  }
}

TEST(KServeDatatypeTest, StringsAreUnimplementedNamingTheTensor) {
  for (const std::string name : {"BYTES", "STRING"}) {
    absl::Status s = DTypeFromDatatype(name, "argument 2").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("argument 2"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(name));
  }
}

}  // namespace
}  // namespace kiln::server
