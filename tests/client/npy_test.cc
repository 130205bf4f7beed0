#include "client/npy.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

template <typename T>
std::vector<T> Values(const NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// Files written by NumPy (tests/client/data/make_npy_fixtures.py).
TEST(NpyTest, ReadsFloat32MatrixNumPyWrote) {
  auto a = ReadNpyFile("tests/client/data/f32_2x3.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, "FP32");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(Values<float>(*a), ::testing::ElementsAre(1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.5f));
}

TEST(NpyTest, ReadsInt64VectorNumPyWrote) {
  auto a = ReadNpyFile("tests/client/data/i64_4.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, "INT64");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4}));
  EXPECT_THAT(Values<int64_t>(*a), ::testing::ElementsAre(1, -2, 3, int64_t{1} << 40));
}

TEST(NpyTest, ReadsScalar) {
  auto a = ReadNpyFile("tests/client/data/f32_scalar.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->shape.empty());
  EXPECT_THAT(Values<float>(*a), ::testing::ElementsAre(42.5f));
}

TEST(NpyTest, RejectsFortranOrderWithInvalidArgument) {
  auto a = ReadNpyFile("tests/client/data/f32_fortran.npy");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("Fortran"));
}

TEST(NpyTest, RejectsFloat64WithInvalidArgument) {
  auto a = ReadNpyFile("tests/client/data/f64_3.npy");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("<f8"));
}

TEST(NpyTest, RoundTripsThroughSerialize) {
  NpyArray a{"FP32", {3, 1}, std::string(12, '\x01')};
  auto b = ParseNpy(SerializeNpy(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape, a.shape);
  EXPECT_EQ(b->data, a.data);
  EXPECT_EQ(SerializeNpy(a).size() % 64, 12u);  // header padded to 64, then the data
}

TEST(NpyTest, RejectsTruncatedDataWithInvalidArgument) {
  std::string bytes = SerializeNpy(NpyArray{"FP32", {4}, std::string(16, '\0')});
  bytes.resize(bytes.size() - 1);
  EXPECT_EQ(ParseNpy(bytes).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NpyTest, RejectsBadMagicWithInvalidArgument) {
  EXPECT_EQ(ParseNpy("PK\x03\x04 this is a zip").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NpyTest, RejectsOverflowingShapeWithInvalidArgument) {
  std::string bytes = SerializeNpy(NpyArray{"FP32", {4}, std::string(16, '\0')});
  const size_t at = bytes.find("(4,)");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 4, "(99999999999,99999999999)");
  EXPECT_EQ(ParseNpy(bytes).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NpyTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadNpyFile("tests/client/data/absent.npy").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::client
