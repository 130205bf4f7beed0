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
