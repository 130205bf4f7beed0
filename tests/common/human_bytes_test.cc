#include "common/human_bytes.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(HumanBytesTest, PicksTheLargestUnitBelowTheValue) {
  EXPECT_EQ(HumanBytes(0), "0 bytes");
  EXPECT_EQ(HumanBytes(1023), "1023 bytes");
  EXPECT_EQ(HumanBytes(12800), "12.5 KiB");
  EXPECT_EQ(HumanBytes(int64_t{64} << 20), "64.0 MiB");
  EXPECT_EQ(HumanBytes(int64_t{128} << 30), "128.0 GiB");
  EXPECT_EQ(HumanBytes(INT64_MAX), "8.0 EiB");
}

}  // namespace
}  // namespace kiln
