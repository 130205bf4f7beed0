// Det and MaxUnpool through the ONNX importer, for what ONNX's node tests
// (2x2 determinants, one 4x4 unpooling) leave out: 3x3 and 5x5 determinants
// against a cofactor expansion, and the bounds that refuse what would be
// too large.
#include <functional>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

// A one-node opset-17 model of `op` over float input "x" of `dims` (and,
// for MaxUnpool, int64 indices "i" of the same dims), attributes as INTS.
std::string OneOpModel(const std::string& op, const std::vector<int64_t>& dims,
                       const std::vector<std::pair<std::string, std::vector<int64_t>>>& attrs) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("one_op");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  n->add_input("x");
  if (op == "MaxUnpool") n->add_input("i");
  n->add_output("y");
  for (const auto& [name, values] : attrs) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  for (const char* name : {"x", "i"}) {
    if (std::string(name) == "i" && op != "MaxUnpool") continue;
    onnx::ValueInfoProto* v = g->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(
        std::string(name) == "x" ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT64);
    for (int64_t d : dims) {
      v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  const size_t out_rank = op == "Det" ? dims.size() - 2 : dims.size();
  for (size_t d = 0; d < out_rank; ++d) {  // dims left to the importer
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  }
  y->mutable_type()->mutable_tensor_type()->mutable_shape();
  return model.SerializeAsString();
}

// The determinant by cofactor expansion along the first row.
double Cofactor(const std::vector<double>& a, int64_t m) {
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t j = 0; j < m; ++j) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r) {
      for (int64_t col = 0; col < m; ++col) {
        if (col != j) minor.push_back(a[r * m + col]);
      }
    }
    det += (j % 2 == 0 ? 1 : -1) * a[j] * Cofactor(minor, m - 1);
  }
  return det;
}

TEST(OnnxComposedConvertersTest, DetMatchesACofactorExpansion) {
  for (int64_t m : {3, 5}) {
    SCOPED_TRACE(m);
    const int64_t batch = 4;
    auto graph = ImportOnnxModel(OneOpModel("Det", {batch, m, m}, {}), OpRegistry::Default(), {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    auto manager = engine::ModelManager::Create({});
    ASSERT_TRUE(manager.ok());
    ASSERT_TRUE((*manager)->Compile("det", *std::move(graph), CompileOptions{}).ok());
    std::vector<float> x(batch * m * m);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 13) / 4 - 1.5f;
    auto input = runtime::Tensor::FromBytes(
        {DType::kFloat32, {batch, m, m}},
        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
    ASSERT_TRUE(input.ok());
    auto result = (*manager)->Find("det")->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->outputs[0].type().shape, std::vector<int64_t>{batch});
    const float* y = static_cast<const float*>(result->outputs[0].data());
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> a(x.begin() + b * m * m, x.begin() + (b + 1) * m * m);
      const double want = Cofactor(a, m);
      EXPECT_NEAR(y[b], want, 1e-4 * std::max(1.0, std::abs(want))) << "matrix " << b;
    }
  }
}

TEST(OnnxComposedConvertersTest, BeyondTheBoundsIsUnimplemented) {
  absl::Status det = ImportOnnxModel(OneOpModel("Det", {7, 7}, {}), OpRegistry::Default(), {})
                         .status();
  EXPECT_EQ(det.code(), absl::StatusCode::kUnimplemented) << det;
  absl::Status unpool =
      ImportOnnxModel(OneOpModel("MaxUnpool", {1, 64, 112, 112},
                                 {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}),
                      OpRegistry::Default(), {})
          .status();
  EXPECT_EQ(unpool.code(), absl::StatusCode::kUnimplemented) << unpool;
}

}  // namespace
}  // namespace kiln
