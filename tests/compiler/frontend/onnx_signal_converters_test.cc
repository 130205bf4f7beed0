// DFT through the ONNX importer, compiled and run, against a direct complex
// sum (std::complex, double) for the cases ONNX's own node tests leave out:
// a onesided transform, a dft_length that zero-pads and one that cuts, and
// an inverse of complex input along a middle axis.
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

struct DftCase {
  std::vector<int64_t> dims;  // the input's, complex parts last
  int64_t axis = 1;
  bool inverse = false;
  bool onesided = false;
  int64_t length = -1;  // dft_length as an initializer; -1: none
};

onnx::ModelProto DftModel(const DftCase& k) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("dft");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("DFT");
  n->set_name("dft");
  n->add_input("x");
  if (k.length >= 0) {
    n->add_input("length");
    onnx::TensorProto* t = g->add_initializer();
    t->set_name("length");
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(k.length);
  }
  n->add_output("y");
  auto attr = [&](const char* name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  attr("axis", k.axis);
  attr("inverse", k.inverse);
  attr("onesided", k.onesided);
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : k.dims) {
    x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t d = 0; d < k.dims.size(); ++d) {  // dims left to the importer
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  }
  return model;
}

// Element `i` of the row-major `dims`, as indices.
std::vector<int64_t> Unflatten(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> at(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    at[d] = i % dims[d];
    i /= dims[d];
  }
  return at;
}

int64_t Flatten(const std::vector<int64_t>& at, const std::vector<int64_t>& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + at[d];
  return i;
}

void CheckDft(const DftCase& k) {
  SCOPED_TRACE(::testing::Message() << "axis " << k.axis << " inverse " << k.inverse << " onesided "
                                    << k.onesided << " length " << k.length);
  auto graph = ImportOnnxModel(DftModel(k).SerializeAsString(), OpRegistry::Default(), {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->Compile("dft", *std::move(graph), CompileOptions{}).ok());
  int64_t count = 1;
  for (int64_t d : k.dims) count *= d;
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i) x[i] = std::sin(0.7 * i) + 0.1f * (i % 5);
  auto input = runtime::Tensor::FromBytes(
      {DType::kFloat32, k.dims},
      absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("dft")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();

  const int64_t points = k.dims[k.axis];
  const int64_t length = k.length >= 0 ? k.length : points;
  const int64_t bins = k.onesided ? length / 2 + 1 : length;
  std::vector<int64_t> out_dims = k.dims;
  out_dims[k.axis] = bins;
  out_dims.back() = 2;
  ASSERT_EQ(result->outputs[0].type().shape, out_dims);
  const float* y = static_cast<const float*>(result->outputs[0].data());
  const bool complex = k.dims.back() == 2;
  const double sign = k.inverse ? 1 : -1;
  const int64_t outputs = result->outputs[0].type().NumElements() / 2;
  for (int64_t o = 0; o < outputs; ++o) {
    std::vector<int64_t> at = Unflatten(o * 2, out_dims);
    const int64_t bin = at[k.axis];
    std::complex<double> want = 0;
    for (int64_t t = 0; t < std::min(points, length); ++t) {
      std::vector<int64_t> from = at;
      from[k.axis] = t;
      from.back() = 0;
      std::complex<double> v(x[Flatten(from, k.dims)], 0);
      if (complex) {
        from.back() = 1;
        v.imag(x[Flatten(from, k.dims)]);
      }
      want += v * std::polar(1.0, sign * 2 * M_PI * static_cast<double>(bin * t) / length);
    }
    if (k.inverse) want /= static_cast<double>(length);
    EXPECT_NEAR(y[o * 2], want.real(), 1e-4) << "bin " << bin;
    EXPECT_NEAR(y[o * 2 + 1], want.imag(), 1e-4) << "bin " << bin;
  }
}

TEST(OnnxSignalConvertersTest, OnesidedDftOfARealSignal) {
  CheckDft({{2, 10, 1}, 1, false, true, -1});
}

TEST(OnnxSignalConvertersTest, DftLengthZeroPadsOrCuts) {
  CheckDft({{2, 10, 1}, 1, false, false, 12});
  CheckDft({{2, 10, 1}, 1, false, true, 6});
}

TEST(OnnxSignalConvertersTest, InverseOfComplexInputAlongAMiddleAxis) {
  CheckDft({{3, 8, 5, 2}, 1, true, false, -1});
  CheckDft({{3, 4, 7, 2}, 2, false, false, 9});
}

TEST(OnnxSignalConvertersTest, AnAxisOnTheComplexDimIsInvalid) {
  absl::Status s =
      ImportOnnxModel(DftModel({{2, 10, 1}, 2}).SerializeAsString(), OpRegistry::Default(), {})
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace kiln
