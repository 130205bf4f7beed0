#include "client/npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

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

TEST(NpyTest, ReadsFloat64VectorNumPyWrote) {
  auto a = ReadNpyFile("tests/client/data/f64_3.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, "FP64");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
  EXPECT_THAT(Values<double>(*a), ::testing::ElementsAre(1.0, 2.0, 3.0));
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each element type, read from what NumPy's np.save wrote (values written out
// by hand in make_npy_fixtures.py and here) and written back byte for byte as
// NumPy wrote it.
template <typename T>
void ExpectReadsAndWritesAsNumPy(const std::string& code, const std::string& datatype,
                                 const std::vector<T>& values) {
  SCOPED_TRACE(code);
  const std::string path = "tests/client/data/" + code + ".npy";
  auto a = ReadNpyFile(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, datatype);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{static_cast<int64_t>(values.size()), 1}));
  EXPECT_EQ(Values<T>(*a), values);
  const std::string numpy_wrote = FileBytes(path);
  ASSERT_FALSE(numpy_wrote.empty());
  EXPECT_EQ(SerializeNpy(*a), numpy_wrote);
}

TEST(NpyTest, ReadsAndWritesEveryNumPyElementTypeAsNumPyDoes) {
  // float16 bits of 1.0, -2.5, 65504 (the largest) and 2^-14 (the smallest normal).
  ExpectReadsAndWritesAsNumPy<uint16_t>("f2", "FP16", {0x3c00, 0xc100, 0x7bff, 0x0400});
  ExpectReadsAndWritesAsNumPy<int8_t>("i1", "INT8", {-128, 127, 0, -1});
  ExpectReadsAndWritesAsNumPy<uint8_t>("u1", "UINT8", {0, 255, 7});
  ExpectReadsAndWritesAsNumPy<int16_t>("i2", "INT16", {-32768, 32767, -2});
  ExpectReadsAndWritesAsNumPy<uint16_t>("u2", "UINT16", {65535, 0, 0x1234});
  ExpectReadsAndWritesAsNumPy<int32_t>("i4", "INT32", {INT32_MIN, INT32_MAX, -2});
  ExpectReadsAndWritesAsNumPy<uint32_t>("u4", "UINT32", {UINT32_MAX, 0, 0xdeadbeefu});
  ExpectReadsAndWritesAsNumPy<uint64_t>("u8", "UINT64", {UINT64_MAX, 0, uint64_t{1} << 63});
  ExpectReadsAndWritesAsNumPy<uint8_t>("b1", "BOOL", {1, 0, 1});
  for (const char* path : {"f32_2x3", "i64_4", "f64_3", "f32_scalar"}) {
    const std::string numpy_wrote = FileBytes(std::string("tests/client/data/") + path + ".npy");
    auto a = ParseNpy(numpy_wrote);
    ASSERT_TRUE(a.ok()) << path << ": " << a.status();
    EXPECT_EQ(SerializeNpy(*a), numpy_wrote) << path;
  }
}

TEST(NpyTest, TakesOneByteTypesWithAnyByteOrderMark) {
  std::string bytes = SerializeNpy(NpyArray{"INT8", {2}, "\x01\xff"});
  const size_t at = bytes.find("|i1");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = '<';
  auto a = ParseNpy(bytes);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, "INT8");
  EXPECT_THAT(Values<int8_t>(*a), ::testing::ElementsAre(1, -1));
}

TEST(NpyTest, RejectsBigEndianAndComplexWithInvalidArgument) {
  for (const char* path : {"tests/client/data/f4_big_endian.npy", "tests/client/data/c8.npy"}) {
    auto a = ReadNpyFile(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("is not supported"));
  }
  auto big = ReadNpyFile("tests/client/data/f4_big_endian.npy");
  EXPECT_THAT(std::string(big.status().message()), ::testing::HasSubstr("'>f4'"));
}

// NumPy has no bfloat16: BF16 goes out as float32, exactly.
TEST(NpyTest, WritesBFloat16AsFloat32) {
  // bfloat16 bits of 1.0, -3.0 and 2^-126 (float32's smallest normal).
  const uint16_t bits[] = {0x3f80, 0xc040, 0x0080};
  NpyArray bf16{"BF16", {3}, std::string(reinterpret_cast<const char*>(bits), sizeof bits)};
  auto a = ParseNpy(SerializeNpy(bf16));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datatype, "FP32");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
  EXPECT_THAT(Values<float>(*a), ::testing::ElementsAre(1.0f, -3.0f, 0x1p-126f));
}

// A float32 .npy for a BF16 input: rounded to nearest, ties to even.
TEST(NpyTest, NarrowsFloat32ToBFloat16RoundingToNearestEven) {
  // 1 + 2^-8 lies halfway between bfloat16 1.0 (0x3f80) and 1 + 2^-7 (0x3f81):
  // even 0x3f80. 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: even 0x3f82.
  // 1 + 2^-8 + 2^-16 is past halfway: 0x3f81.
  const float values[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-16f, -2.0f};
  NpyArray fp32{"FP32", {4}, std::string(reinterpret_cast<const char*>(values), sizeof values)};
  NpyArray bf16 = Float32ToBFloat16(fp32);
  EXPECT_EQ(bf16.datatype, "BF16");
  EXPECT_EQ(bf16.shape, fp32.shape);
  EXPECT_THAT(Values<uint16_t>(bf16), ::testing::ElementsAre(0x3f80, 0x3f82, 0x3f81, 0xc000));

  NpyArray int8{"INT8", {1}, "\x05"};
  EXPECT_EQ(Float32ToBFloat16(int8).datatype, "INT8");
}

TEST(NpyTest, RefusesToWriteAnUnknownDatatype) {
  absl::Status s = WriteNpyFile(::testing::TempDir() + "/x.npy", NpyArray{"BYTES", {1}, "a"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("BYTES"));
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
