// NonZero, Compress and Unique at the importer: which inputs decide their
// shapes, the graph once they are given (a constant, specialised on the
// value), and what is refused (a large float input, a condition past the data).
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_importer.h"
#include "compiler/ir/element_access.h"
#include "compiler/ops/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Input {
  std::string name;
  int32_t elem;
  std::vector<int64_t> dims;
};

// A one-node opset-13 model of `op` over `inputs`, one output "y" of no
// declared shape (int64 for NonZero, else the first input's type); `axis`
// set when given.
std::string OneOpModel(const std::string& op, const std::vector<Input>& inputs,
                       std::optional<int64_t> axis = std::nullopt) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("one_op");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  for (const Input& in : inputs) {
    n->add_input(in.name);
    onnx::ValueInfoProto* v = g->add_input();
    v->set_name(in.name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(in.elem);
    for (int64_t d : in.dims) {
      v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  n->add_output("y");
  if (axis) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*axis);
  }
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(
      op == "NonZero" ? onnx::TensorProto::INT64 : inputs[0].elem);
  const size_t rank = op == "NonZero" ? 2 : inputs[0].dims.size();
  for (size_t d = 0; d < rank; ++d) {  // dims left to the importer
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  }
  return model.SerializeAsString();
}

TEST(OnnxValueShapeConvertersTest, SmallBoolInputDecidesAndFoldsToItsValue) {
  const std::string model = OneOpModel("NonZero", {{"mask", onnx::TensorProto::BOOL, {4}}});
  absl::StatusOr<Graph> waiting = ImportOnnxModel(model, OpRegistry::Default(), {});
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(InputsThatDecideShapes(waiting.status()), ElementsAre("mask"));

  OnnxImportOptions options;
  options.input_values["mask"] = {1, 0, 1, 1};
  absl::StatusOr<Graph> graph = ImportOnnxModel(model, OpRegistry::Default(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Node* y = graph->outputs()[0];
  ASSERT_TRUE(y->is_constant());
  EXPECT_EQ(y->type, (TensorType{DType::kInt64, {1, 3}}));
  std::vector<int64_t> v;
  for (int64_t k = 0; k < 3; ++k)
    v.push_back(ReadElementAsInt(DType::kInt64, y->value->bytes.data(), k));
  EXPECT_THAT(v, ElementsAre(0, 2, 3));
}

TEST(OnnxValueShapeConvertersTest, LargeFloatInputIsAValueDependentShape) {
  absl::Status s = ImportOnnxModel(OneOpModel("NonZero", {{"x", onnx::TensorProto::FLOAT, {100}}}),
                                   OpRegistry::Default(), {})
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("decides a shape"));
  EXPECT_TRUE(InputsThatDecideShapes(s).empty());
}

TEST(OnnxValueShapeConvertersTest, CompressLeavesTheDataAnInput) {
  const std::string model = OneOpModel(
      "Compress",
      {{"data", onnx::TensorProto::FLOAT, {3, 200}}, {"condition", onnx::TensorProto::BOOL, {3}}},
      0);
  absl::StatusOr<Graph> waiting = ImportOnnxModel(model, OpRegistry::Default(), {});
  EXPECT_THAT(InputsThatDecideShapes(waiting.status()), ElementsAre("condition"));
  OnnxImportOptions options;
  options.input_values["condition"] = {0, 1, 1};
  absl::StatusOr<Graph> graph = ImportOnnxModel(model, OpRegistry::Default(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->name, "data");
  EXPECT_EQ(graph->outputs()[0]->type, (TensorType{DType::kFloat32, {2, 200}}));
}

TEST(OnnxValueShapeConvertersTest, CompressConditionPastTheDataIsInvalidArgument) {
  const std::string model = OneOpModel(
      "Compress",
      {{"data", onnx::TensorProto::FLOAT, {2, 2}}, {"condition", onnx::TensorProto::BOOL, {3}}}, 0);
  OnnxImportOptions options;
  options.input_values["condition"] = {0, 0, 1};
  absl::Status s = ImportOnnxModel(model, OpRegistry::Default(), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace kiln
