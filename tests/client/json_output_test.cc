#include "client/json_output.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(JsonOutputTest, SchemaVersionComesFirst) {
  EXPECT_EQ(WithSchemaVersion("{\"a\": 1}"), "{\"schema_version\": 1, \"a\": 1}");
  EXPECT_EQ(WithSchemaVersion("{\n \"a\": 1\n}"), "{\"schema_version\": 1,\n \"a\": 1\n}");
  EXPECT_EQ(WithSchemaVersion("{}"), "{\"schema_version\": 1}");
  EXPECT_EQ(WithSchemaVersion("{\n}"), "{\"schema_version\": 1\n}");
}

TEST(JsonOutputTest, QuoteEscapesWhatJsonRequires) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

std::string Fp32(float v) {
  std::string data(4, '\0');
  std::memcpy(data.data(), &v, 4);
  return JsonElement(*FindElementType("FP32"), data, 0);
}

TEST(JsonOutputTest, FloatsReadBackExactlyAndNonFiniteAreStrings) {
  const float third = 1.0f / 3.0f;
  EXPECT_EQ(std::strtof(Fp32(third).c_str(), nullptr), third);
  EXPECT_EQ(Fp32(std::numeric_limits<float>::quiet_NaN()), "\"NaN\"");
  EXPECT_EQ(Fp32(-std::numeric_limits<float>::infinity()), "\"-Infinity\"");
  std::string data(8, '\0');
  const double d = 0.1;
  std::memcpy(data.data(), &d, 8);
  EXPECT_EQ(std::strtod(JsonElement(*FindElementType("FP64"), data, 0).c_str(), nullptr), d);
  const int64_t big = (int64_t{1} << 60) + 1;
  std::memcpy(data.data(), &big, 8);
  EXPECT_EQ(JsonElement(*FindElementType("INT64"), data, 0), "1152921504606846977");
}

}  // namespace
}  // namespace kiln::client
