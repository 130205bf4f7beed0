#include "runtime/tensor.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

static_assert(!std::is_copy_constructible_v<Tensor>, "tensors own their bytes: move them");
static_assert(std::is_nothrow_move_constructible_v<Tensor>);

TEST(TensorTest, AllocateIsZeroFilledAnd64ByteAligned) {
  absl::StatusOr<Tensor> t = Tensor::Allocate({DType::kFloat32, {3, 5}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->byte_size(), 60);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  EXPECT_EQ(t->bytes(), std::string(60, '\0'));
  EXPECT_EQ(t->type(), (TensorType{DType::kFloat32, {3, 5}}));
}

// A large tensor's bytes go back to TensorMemoryPool and serve the next
// large tensor -- dirty, so Allocate still zeroes them; small ones stay with
// malloc.
TEST(TensorTest, LargeTensorsReuseFreedBlocks) {
  const TensorType large{DType::kFloat32, {512, 1024}};  // 2 MB
  {
    absl::StatusOr<Tensor> t = Tensor::AllocateUninitialized(large);
    ASSERT_TRUE(t.ok()) << t.status();
    std::memset(t->data(), 0x5a, t->byte_size());
  }
  const WorkspacePool::Stats before = TensorMemoryPool().stats();
  absl::StatusOr<Tensor> again = Tensor::Allocate(large);
  ASSERT_TRUE(again.ok()) << again.status();
  const WorkspacePool::Stats after = TensorMemoryPool().stats();
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.reuses, before.reuses + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->data()) % 64, 0u);
  EXPECT_EQ(again->bytes(), std::string(again->byte_size(), '\0'));

  absl::StatusOr<Tensor> small = Tensor::Allocate({DType::kFloat32, {1000}});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(TensorMemoryPool().stats().live_bytes, after.live_bytes);
}

TEST(TensorTest, ByteSizeFollowsDType) {
  EXPECT_EQ(Tensor::Allocate({DType::kInt64, {4}})->byte_size(), 32);
  EXPECT_EQ(Tensor::Allocate({DType::kBool, {4}})->byte_size(), 4);
  EXPECT_EQ(Tensor::Allocate({DType::kFloat32, {}})->byte_size(), 4);  // a scalar
  EXPECT_EQ(Tensor::Allocate({DType::kFloat32, {0, 7}})->byte_size(), 0);
}

TEST(TensorTest, AllocateOverTheSizeLimitIsResourceExhausted) {
  // 2^31 float32 elements = 8 GiB, over the 4 GiB per-tensor limit; nothing is allocated.
  absl::StatusOr<Tensor> t = Tensor::Allocate({DType::kFloat32, {int64_t{1} << 31}});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("limit"));
}

TEST(TensorTest, NegativeDimIsInvalidArgument) {
  EXPECT_EQ(Tensor::Allocate({DType::kFloat32, {2, -1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, FromBytesCopiesTheBytes) {
  const float values[] = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::string bytes(reinterpret_cast<const char*>(values), sizeof(values));
  absl::StatusOr<Tensor> t = Tensor::FromBytes({DType::kFloat32, {2, 3}}, bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  bytes[0] = 'x';  // the tensor holds its own copy
  EXPECT_EQ(std::memcmp(t->data(), values, sizeof(values)), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
}

TEST(TensorTest, FromBytesOfTheWrongSizeIsInvalidArgumentSayingExpectedAndGot) {
  absl::StatusOr<Tensor> t = Tensor::FromBytes({DType::kFloat32, {2, 3}}, std::string(20, 'a'));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("float32[2,3]"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("needs 24 bytes, got 20"));
}

TEST(TensorTest, MoveTransfersTheStorage) {
  absl::StatusOr<Tensor> t = Tensor::Allocate({DType::kInt64, {8}});
  ASSERT_TRUE(t.ok());
  void* storage = t->data();
  Tensor moved = *std::move(t);
  EXPECT_EQ(moved.data(), storage);
  EXPECT_EQ(moved.byte_size(), 64);
  Tensor assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), storage);
}

TEST(TensorTest, AdoptRunsFromTheOwnersBytesAndKeepsThemAlive) {
  // The owner only witnesses the lifetime here; the bytes are the test's.
  auto block = std::make_shared<int>(0);
  alignas(64) static float storage[16];
  for (int i = 0; i < 16; ++i) storage[i] = static_cast<float>(i) * 0.5f;
  std::weak_ptr<int> watch = block;
  absl::StatusOr<Tensor> t = Tensor::Adopt(
      {DType::kFloat32, {4, 4}}, absl::string_view(reinterpret_cast<char*>(storage), 64), block);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data(), static_cast<void*>(storage));  // not a copy
  EXPECT_EQ(static_cast<const float*>(t->data())[5], 2.5f);
  block.reset();
  EXPECT_FALSE(watch.expired());  // the tensor holds the owner
  { Tensor moved = *std::move(t); }
  EXPECT_TRUE(watch.expired());  // and lets it go with itself, without freeing the bytes
}

TEST(TensorTest, AdoptRefusesUnalignedBytesAndTheWrongSize) {
  alignas(64) static char storage[128];
  absl::StatusOr<Tensor> unaligned = Tensor::Adopt(
      {DType::kFloat32, {4}}, absl::string_view(storage + 16, 16), std::make_shared<int>(0));
  EXPECT_EQ(unaligned.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Tensor> short_bytes = Tensor::Adopt(
      {DType::kFloat32, {4}}, absl::string_view(storage, 12), std::make_shared<int>(0));
  EXPECT_EQ(short_bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_bytes.status().message()), HasSubstr("needs 16 bytes, got 12"));
}

}  // namespace
}  // namespace kiln::runtime
