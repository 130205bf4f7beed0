#include "compiler/ir/constant_bytes.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(ConstantBytesTest, TakesAStringOverWithoutCopyingIt) {
  std::string weights(1 << 20, 'w');
  const char* storage = weights.data();
  ConstantBytes bytes(std::move(weights));
  EXPECT_EQ(bytes.data(), storage);
  EXPECT_EQ(bytes.size(), size_t{1} << 20);
  EXPECT_FALSE(bytes.aligned());
}

TEST(ConstantBytesTest, AlignedBlocksAreAlignedAndZeroPaddedToTheAlignment) {
  ConstantBytes bytes = ConstantBytes::Aligned(70);
  ASSERT_TRUE(bytes.aligned());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % ConstantBytes::kAlignment, 0u);
  EXPECT_EQ(bytes.size(), 70u);
  // 70 bytes round up to 128: the 58 past the end read as zeros.
  for (int i = 70; i < 128; ++i) EXPECT_EQ(bytes.data()[i], 0) << i;
}

TEST(ConstantBytesTest, CopiesOfAnAlignedBlockAreAlignedCopies) {
  ConstantBytes bytes = ConstantBytes::Aligned(8);
  std::memcpy(bytes.data(), "abcdefgh", 8);
  ConstantBytes copy = bytes;
  EXPECT_TRUE(copy.aligned());
  EXPECT_NE(copy.data(), bytes.data());
  EXPECT_EQ(copy.view(), "abcdefgh");
  EXPECT_TRUE(copy == bytes);
}

TEST(ConstantBytesTest, ResizingAnAlignedBlockKeepsItsBytesAsAString) {
  ConstantBytes bytes = ConstantBytes::Aligned(4);
  std::memcpy(bytes.data(), "wxyz", 4);
  bytes.resize(6);
  EXPECT_FALSE(bytes.aligned());
  EXPECT_EQ(bytes.view(), absl::string_view("wxyz\0\0", 6));
  bytes.assign("ab", 2);
  EXPECT_EQ(bytes.view(), "ab");
  EXPECT_EQ(bytes.substr(1, 5), "b");
}

}  // namespace
}  // namespace kiln
