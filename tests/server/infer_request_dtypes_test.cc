// Every element type through the KServe encoding: raw and typed contents in,
// raw contents out, with bytes written out by hand (little-endian).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/infer_request.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Contents = inference::InferTensorContents;

// A model with one input, "x".
Program OneInput(DType dtype, std::vector<int64_t> shape) {
  Program program;
  ValueSpec x;
  x.kind = ValueSpec::Kind::kInput;
  x.name = "x";
  x.type.dtype = dtype;
  x.type.shape = std::move(shape);
  program.values.push_back(x);
  program.inputs = {0};
  return program;
}

inference::ModelInferRequest Request(const std::string& datatype, std::vector<int64_t> shape) {
  inference::ModelInferRequest request;
  auto* x = request.add_inputs();
  x->set_name("x");
  x->set_datatype(datatype);
  for (int64_t d : shape) x->add_shape(d);
  return request;
}

// The bytes of the one tensor DecodeInputs makes of `request`.
absl::StatusOr<std::string> Decode(DType dtype, std::vector<int64_t> shape,
                                   const inference::ModelInferRequest& request) {
  absl::StatusOr<std::vector<runtime::Tensor>> tensors =
      DecodeInputs(OneInput(dtype, std::move(shape)), request);
  if (!tensors.ok()) return tensors.status();
  if (tensors->size() != 1 || (*tensors)[0].type().dtype != dtype) {
    return absl::InternalError("not one tensor of the input's type");
  }
  return std::string((*tensors)[0].bytes());
}

absl::StatusOr<std::string> DecodeRaw(DType dtype, const std::string& datatype,
                                      std::vector<int64_t> shape, const std::string& raw) {
  inference::ModelInferRequest request = Request(datatype, shape);
  request.add_raw_input_contents(raw);
  return Decode(dtype, shape, request);
}

absl::StatusOr<std::string> DecodeTyped(DType dtype, const std::string& datatype,
                                        std::vector<int64_t> shape,
                                        const std::function<void(Contents*)>& fill) {
  inference::ModelInferRequest request = Request(datatype, shape);
  fill(request.mutable_inputs(0)->mutable_contents());
  return Decode(dtype, shape, request);
}

struct RawCase {
  DType dtype;
  std::string datatype;
  std::vector<int64_t> shape;
  std::string bytes;
};

const std::vector<RawCase>& RawCases() {
  static const auto* cases = new std::vector<RawCase>{
      {DType::kBool, "BOOL", {3}, std::string("\x01\x00\x01", 3)},
      {DType::kUInt8, "UINT8", {2}, "\xff\x07"},
      {DType::kInt8, "INT8", {2}, "\x80\x7f"},
      {DType::kUInt16, "UINT16", {1}, "\x34\x12"},
      {DType::kInt16, "INT16", {1}, std::string("\x00\x80", 2)},
      {DType::kFloat16, "FP16", {2}, std::string("\x00\x3c\x00\xc0", 4)},  // 1.0, -2.0
      {DType::kBFloat16, "BF16", {1}, "\x80\x3f"},                         // 1.0
      {DType::kInt32, "INT32", {1}, "\xfe\xff\xff\xff"},
      {DType::kUInt32, "UINT32", {1}, "\xef\xbe\xad\xde"},
      {DType::kFloat32, "FP32", {1}, std::string("\x00\x00\xc0\x3f", 4)},  // 1.5
      {DType::kInt64, "INT64", {1}, "\xfe\xff\xff\xff\xff\xff\xff\xff"},
      {DType::kUInt64, "UINT64", {1}, std::string("\x01\0\0\0\0\0\0\x80", 8)},
      {DType::kFloat64, "FP64", {1, 1}, std::string("\0\0\0\0\0\0\0\xc0", 8)},  // -2.0
  };
  return *cases;
}

TEST(InferRequestDTypesTest, DecodesRawContentsOfEveryType) {
  ASSERT_EQ(RawCases().size(), std::size(kAllDTypes));
  for (const RawCase& c : RawCases()) {
    absl::StatusOr<std::string> bytes = DecodeRaw(c.dtype, c.datatype, c.shape, c.bytes);
    ASSERT_TRUE(bytes.ok()) << c.datatype << ": " << bytes.status();
    EXPECT_EQ(*bytes, c.bytes) << c.datatype;

    absl::Status short_by_one =
        DecodeRaw(c.dtype, c.datatype, c.shape, c.bytes.substr(1)).status();
    EXPECT_EQ(short_by_one.code(), absl::StatusCode::kInvalidArgument) << c.datatype;
    EXPECT_THAT(std::string(short_by_one.message()),
                HasSubstr(absl::StrCat("needs ", c.bytes.size(), " raw bytes")));
  }
}

TEST(InferRequestDTypesTest, RawBoolBytesOtherThanZeroAndOneReadAsTrue) {
  absl::StatusOr<std::string> bytes =
      DecodeRaw(DType::kBool, "BOOL", {3}, std::string("\x02\x00\xff", 3));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::string("\x01\x00\x01", 3));
}

TEST(InferRequestDTypesTest, DecodesTypedContentsOfEveryIntegerAndBoolType) {
  struct Case {
    DType dtype;
    std::string datatype;
    std::function<void(Contents*)> fill;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {DType::kBool, "BOOL",
       [](Contents* c) {
         c->add_bool_contents(true);
         c->add_bool_contents(false);
       },
       std::string("\x01\x00", 2)},
      {DType::kInt8, "INT8",
       [](Contents* c) {
         c->add_int_contents(-128);
         c->add_int_contents(127);
       },
       "\x80\x7f"},
      {DType::kInt16, "INT16",
       [](Contents* c) {
         c->add_int_contents(-32768);
         c->add_int_contents(0x1234);
       },
       std::string("\x00\x80\x34\x12", 4)},
      {DType::kInt32, "INT32",
       [](Contents* c) {
         c->add_int_contents(-2);
         c->add_int_contents(0x12345678);
       },
       "\xfe\xff\xff\xff\x78\x56\x34\x12"},
      {DType::kInt64, "INT64",
       [](Contents* c) {
         c->add_int64_contents(-2);
         c->add_int64_contents(int64_t{1} << 40);
       },
       std::string("\xfe\xff\xff\xff\xff\xff\xff\xff\0\0\0\0\0\x01\0\0", 16)},
      {DType::kUInt8, "UINT8",
       [](Contents* c) {
         c->add_uint_contents(255);
         c->add_uint_contents(7);
       },
       "\xff\x07"},
      {DType::kUInt16, "UINT16",
       [](Contents* c) {
         c->add_uint_contents(65535);
         c->add_uint_contents(0x1234);
       },
       "\xff\xff\x34\x12"},
      {DType::kUInt32, "UINT32",
       [](Contents* c) {
         c->add_uint_contents(0xdeadbeefu);
         c->add_uint_contents(1);
       },
       std::string("\xef\xbe\xad\xde\x01\0\0\0", 8)},
      {DType::kUInt64, "UINT64",
       [](Contents* c) {
         c->add_uint64_contents(0x8000000000000001u);
         c->add_uint64_contents(2);
       },
       std::string("\x01\0\0\0\0\0\0\x80\x02\0\0\0\0\0\0\0", 16)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> bytes = DecodeTyped(c.dtype, c.datatype, {2}, c.fill);
    ASSERT_TRUE(bytes.ok()) << c.datatype << ": " << bytes.status();
    EXPECT_EQ(*bytes, c.bytes) << c.datatype;
  }
}

TEST(InferRequestDTypesTest, DecodesTypedFloat32AndFloat64) {
  absl::StatusOr<std::string> fp32 = DecodeTyped(
      DType::kFloat32, "FP32", {1}, [](Contents* c) { c->add_fp32_contents(1.5f); });
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(*fp32, std::string("\x00\x00\xc0\x3f", 4));
  absl::StatusOr<std::string> fp64 = DecodeTyped(
      DType::kFloat64, "FP64", {1}, [](Contents* c) { c->add_fp64_contents(-2.0); });
  ASSERT_TRUE(fp64.ok()) << fp64.status();
  EXPECT_EQ(*fp64, std::string("\0\0\0\0\0\0\0\xc0", 8));
}

TEST(InferRequestDTypesTest, TypedValueOutOfRangeForANarrowTypeIsInvalidArgument) {
  struct Case {
    DType dtype;
    std::string datatype;
    std::function<void(Contents*)> fill;
    std::string message;
  };
  const std::vector<Case> cases = {
      {DType::kInt8, "INT8", [](Contents* c) { c->add_int_contents(0), c->add_int_contents(128); },
       "int_contents[1] = 128 is out of range for INT8"},
      {DType::kInt8, "INT8",
       [](Contents* c) { c->add_int_contents(-129), c->add_int_contents(0); },
       "int_contents[0] = -129 is out of range for INT8"},
      {DType::kInt16, "INT16",
       [](Contents* c) { c->add_int_contents(32768), c->add_int_contents(0); },
       "int_contents[0] = 32768 is out of range for INT16"},
      {DType::kUInt8, "UINT8",
       [](Contents* c) { c->add_uint_contents(1), c->add_uint_contents(256); },
       "uint_contents[1] = 256 is out of range for UINT8"},
      {DType::kUInt16, "UINT16",
       [](Contents* c) { c->add_uint_contents(65536), c->add_uint_contents(0); },
       "uint_contents[0] = 65536 is out of range for UINT16"},
  };
  for (const Case& c : cases) {
    absl::Status s = DecodeTyped(c.dtype, c.datatype, {2}, c.fill).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr("input 'x'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(InferRequestDTypesTest, HalfTypesInTypedContentsAreRefusedAskingForRaw) {
  for (auto [dtype, datatype] : {std::pair{DType::kFloat16, "FP16"},
                                 std::pair{DType::kBFloat16, "BF16"}}) {
    absl::Status s = DecodeTyped(dtype, datatype, {2}, [](Contents* c) {
                       c->add_fp32_contents(1);
                       c->add_fp32_contents(2);
                     }).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << datatype;
    EXPECT_THAT(std::string(s.message()), HasSubstr("input 'x' is " + std::string(datatype)));
    EXPECT_THAT(std::string(s.message()), HasSubstr("raw_input_contents"));
  }
}

TEST(InferRequestDTypesTest, TypedContentsInAnotherTypesFieldAreCountedAsMissing) {
  absl::Status s = DecodeTyped(DType::kFloat64, "FP64", {2}, [](Contents* c) {
                     c->add_fp32_contents(1);
                     c->add_fp32_contents(2);
                   }).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("fp64_contents holds 0 elements"));
}

TEST(InferRequestDTypesTest, DatatypeOtherThanTheInputsIsInvalidArgumentNamingBoth) {
  absl::Status s = DecodeRaw(DType::kFloat16, "BF16", {1}, "\x80\x3f").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'x' expects datatype FP16, got 'BF16'"));

  absl::Status unknown = DecodeRaw(DType::kFloat32, "FLOAT32", {1}, "\0\0\0\0").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("input 'x'"));
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("'FLOAT32'"));
}

TEST(InferRequestDTypesTest, BytesInputIsUnimplementedNamingIt) {
  absl::Status s = DecodeRaw(DType::kUInt8, "BYTES", {1}, "a").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'x'"));
}

// `shape` int32 or int64 [2], whose values decide shapes.
ModelSignature SignatureWithAValueInput() {
  TensorSignature shape;
  shape.name = "shape";
  shape.dtype = DType::kInt64;
  shape.dims = {2};
  shape.decides_shapes = true;
  return {{shape}, {}};
}

TEST(InferRequestDTypesTest, VariantKeyTakesInt32ValuesAsInt64) {
  inference::ModelInferRequest raw = Request("INT32", {2});
  raw.mutable_inputs(0)->set_name("shape");
  raw.add_raw_input_contents(std::string("\x06\0\0\0\xff\xff\xff\xff", 8));  // 6, -1
  absl::StatusOr<std::vector<std::vector<int64_t>>> key =
      RequestVariantKey(SignatureWithAValueInput(), raw);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(*key, ElementsAre(ElementsAre(2), ElementsAre(6, -1)));

  inference::ModelInferRequest typed = Request("INT32", {2});
  typed.mutable_inputs(0)->set_name("shape");
  typed.mutable_inputs(0)->mutable_contents()->add_int_contents(3);
  typed.mutable_inputs(0)->mutable_contents()->add_int_contents(-1);
  key = RequestVariantKey(SignatureWithAValueInput(), typed);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(*key, ElementsAre(ElementsAre(2), ElementsAre(3, -1)));

  inference::ModelInferRequest short_raw = Request("INT32", {2});
  short_raw.mutable_inputs(0)->set_name("shape");
  short_raw.add_raw_input_contents(std::string(16, '\0'));  // int64's size
  absl::Status s = RequestVariantKey(SignatureWithAValueInput(), short_raw).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs 8 raw bytes"));

  inference::ModelInferRequest fp = Request("FP32", {2});
  fp.mutable_inputs(0)->set_name("shape");
  s = RequestVariantKey(SignatureWithAValueInput(), fp).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("must be INT64 or INT32, got FP32"));
}

TEST(InferRequestDTypesTest, OutputsOfEveryTypeComeOutRawWithTheirDatatype) {
  Program program;
  runtime::RunResult result;
  for (const RawCase& c : RawCases()) {
    ValueSpec v;
    v.name = "out_" + c.datatype;
    v.type.dtype = c.dtype;
    v.type.shape = c.shape;
    program.outputs.push_back(static_cast<int>(program.values.size()));
    program.output_names.push_back(v.name);
    program.values.push_back(v);
    absl::StatusOr<runtime::Tensor> t = runtime::Tensor::FromBytes(v.type, c.bytes);
    ASSERT_TRUE(t.ok()) << t.status();
    result.outputs.push_back(*std::move(t));
  }
  inference::ModelInferResponse response;
  ASSERT_TRUE(
      EncodeOutputs(program, inference::ModelInferRequest(), std::move(result), &response).ok());
  ASSERT_EQ(response.outputs_size(), static_cast<int>(RawCases().size()));
  for (size_t i = 0; i < RawCases().size(); ++i) {
    const RawCase& c = RawCases()[i];
    EXPECT_EQ(response.outputs(i).name(), "out_" + c.datatype);
    EXPECT_EQ(response.outputs(i).datatype(), c.datatype);
    EXPECT_THAT(response.outputs(i).shape(), ::testing::ElementsAreArray(c.shape));
    EXPECT_EQ(response.raw_output_contents(i), c.bytes) << c.datatype;
  }
}

}  // namespace
}  // namespace kiln::server
