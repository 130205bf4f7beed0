#include "server/infer_request.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x float32[batch, 3] and `shape` int64[2], whose values decide shapes.
ModelSignature SignatureWithAValueInput() {
  TensorSignature x;
  x.name = "x";
  x.dims = {TensorSignature::kSymbolicDim, 3};
  x.symbols = {"batch", ""};
  TensorSignature shape;
  shape.name = "shape";
  shape.dtype = DType::kInt64;
  shape.dims = {TensorSignature::kSymbolicDim};
  shape.symbols = {""};
  shape.decides_shapes = true;
  return {{x, shape}, {}};
}

inference::ModelInferRequest RequestWithShapeInput(int64_t shape_elements) {
  inference::ModelInferRequest request;
  auto* x = request.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(2);
  x->add_shape(3);
  auto* shape = request.add_inputs();
  shape->set_name("shape");
  shape->set_datatype("INT64");
  shape->add_shape(shape_elements);
  return request;
}

TEST(InferRequestTest, VariantKeyHoldsShapesThenTheValuesThatDecideShapes) {
  inference::ModelInferRequest request = RequestWithShapeInput(2);
  request.mutable_inputs(1)->mutable_contents()->add_int64_contents(6);
  request.mutable_inputs(1)->mutable_contents()->add_int64_contents(1);
  absl::StatusOr<std::vector<std::vector<int64_t>>> key =
      RequestVariantKey(SignatureWithAValueInput(), request);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(*key, ElementsAre(ElementsAre(2, 3), ElementsAre(2), ElementsAre(6, 1)));
}

// A float input that decides shapes (a Resize's scales): its values travel
// as their doubles' bits, from FP32 or FP64, raw or typed; an integer type
// for it is refused.
TEST(InferRequestTest, FloatValuesThatDecideShapesAreKeyedByTheirBits) {
  ModelSignature signature = SignatureWithAValueInput();
  signature.inputs[1].dtype = DType::kFloat32;
  const std::vector<int64_t> want = {DecidingValueFromDouble(0.5), DecidingValueFromDouble(2.0)};
  EXPECT_EQ(DoubleFromDecidingValue(want[0]), 0.5);

  inference::ModelInferRequest typed = RequestWithShapeInput(2);
  typed.mutable_inputs(1)->set_datatype("FP32");
  typed.mutable_inputs(1)->mutable_contents()->add_fp32_contents(0.5f);
  typed.mutable_inputs(1)->mutable_contents()->add_fp32_contents(2.0f);
  absl::StatusOr<std::vector<std::vector<int64_t>>> key = RequestVariantKey(signature, typed);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->back(), want);

  inference::ModelInferRequest raw = RequestWithShapeInput(2);
  raw.mutable_inputs(1)->set_datatype("FP64");
  const double values[] = {0.5, 2.0};
  raw.add_raw_input_contents(std::string(2 * 3 * sizeof(float), '\0'));  // x
  raw.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof values));
  key = RequestVariantKey(signature, raw);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->back(), want);

  inference::ModelInferRequest ints = RequestWithShapeInput(2);
  ints.mutable_inputs(1)->mutable_contents()->add_int64_contents(1);
  ints.mutable_inputs(1)->mutable_contents()->add_int64_contents(2);
  absl::Status refused = RequestVariantKey(signature, ints).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("FP32 or FP64"));
}

// A bool input that decides shapes (NonZero's, Compress's condition): BOOL,
// raw (any nonzero byte is true) or typed, keyed as 0 and 1.
TEST(InferRequestTest, BoolValuesThatDecideShapesAreKeyedAsZeroAndOne) {
  ModelSignature signature = SignatureWithAValueInput();
  signature.inputs[1].dtype = DType::kBool;

  inference::ModelInferRequest typed = RequestWithShapeInput(3);
  typed.mutable_inputs(1)->set_datatype("BOOL");
  for (bool b : {true, false, true}) {
    typed.mutable_inputs(1)->mutable_contents()->add_bool_contents(b);
  }
  absl::StatusOr<std::vector<std::vector<int64_t>>> key = RequestVariantKey(signature, typed);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(key->back(), ElementsAre(1, 0, 1));

  inference::ModelInferRequest raw = RequestWithShapeInput(3);
  raw.mutable_inputs(1)->set_datatype("BOOL");
  raw.add_raw_input_contents(std::string(2 * 3 * sizeof(float), '\0'));  // x
  raw.add_raw_input_contents(std::string("\0\x07\x01", 3));
  key = RequestVariantKey(signature, raw);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(key->back(), ElementsAre(0, 1, 1));

  raw.mutable_raw_input_contents()->at(1) = std::string(2, '\1');
  absl::Status short_raw = RequestVariantKey(signature, raw).status();
  EXPECT_EQ(short_raw.code(), absl::StatusCode::kInvalidArgument) << short_raw;

  inference::ModelInferRequest ints = RequestWithShapeInput(3);
  for (int v : {1, 0, 1}) ints.mutable_inputs(1)->mutable_contents()->add_int64_contents(v);
  absl::Status refused = RequestVariantKey(signature, ints).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("BOOL"));
}

// Found by //fuzz:infer_request_fuzzer: the values were allocated at the size
// the shape declared before the request's contents were counted.
TEST(InferRequestTest, VariantKeyRefusesAHugeValueShapeWithoutAllocatingIt) {
  const int64_t huge = kMaxTensorElements;  // 512 GiB of int64
  absl::Status contents =
      RequestVariantKey(SignatureWithAValueInput(), RequestWithShapeInput(huge)).status();
  EXPECT_EQ(contents.code(), absl::StatusCode::kInvalidArgument) << contents;
  EXPECT_THAT(std::string(contents.message()), HasSubstr("contents hold 0 elements"));

  inference::ModelInferRequest raw = RequestWithShapeInput(huge);
  raw.add_raw_input_contents(std::string(24, '\0'));
  raw.add_raw_input_contents(std::string(16, '\0'));
  absl::Status raw_status = RequestVariantKey(SignatureWithAValueInput(), raw).status();
  EXPECT_EQ(raw_status.code(), absl::StatusCode::kInvalidArgument) << raw_status;
  EXPECT_THAT(std::string(raw_status.message()), HasSubstr("raw bytes"));
}

// Found by --config=asan (UBSan: null pointer passed to memcpy) in kiln-server
// under onnx_conformance_test: a value input with no elements, sent raw.
TEST(InferRequestTest, VariantKeyTakesAnEmptyValueInputSentRaw) {
  inference::ModelInferRequest request = RequestWithShapeInput(0);
  request.add_raw_input_contents(std::string(24, '\0'));
  request.add_raw_input_contents("");
  absl::StatusOr<std::vector<std::vector<int64_t>>> key =
      RequestVariantKey(SignatureWithAValueInput(), request);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_THAT(*key, ElementsAre(ElementsAre(2, 3), ElementsAre(0), ElementsAre()));
}

}  // namespace
}  // namespace kiln::server
