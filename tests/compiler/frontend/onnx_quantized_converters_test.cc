// The QDQ pattern around Gemm and MatMul (QuantizeLinear -> DequantizeLinear
// on the activation, DequantizeLinear of constant integer weights) against
// the ONNX definition computed here in double: the importer multiplies the
// centered integers and scales once, and the compiled kernel keeps the
// centered weights as narrow integers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "compiler/frontend/onnx_importer.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

template <typename T>
void AddInitializer(onnx::GraphProto* g, const std::string& name, int elem_type,
                    const std::vector<int64_t>& dims, const std::vector<T>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& in, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AddValueInfo(onnx::ValueInfoProto* v, const std::string& name,
                  const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// What the model computes: x [M, K] quantised to uint8 (scale sx, zero point
// zx) and dequantised; weights stored as `w_type` integers (int8 or uint8)
// with per-column scales `sw` (one value: per tensor) and zero point zw,
// [N, K] for a Gemm with transB, [K, N] for a MatMul; a bias for the Gemm.
struct QdqLinear {
  bool gemm = true;
  int64_t m = 8, k = 64, n = 48;  // enough work for the contraction schedule
  float sx = 0.05f;
  uint8_t zx = 120;
  int w_type = onnx::TensorProto::INT8;
  std::vector<int32_t> w;  // the stored integers
  std::vector<float> sw;
  int32_t zw = 0;
  std::vector<float> bias;
  float alpha = 1;

  int64_t WeightIndex(int64_t kk, int64_t col) const { return gemm ? col * k + kk : kk * n + col; }

  std::string Model() const {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(13);
    onnx::GraphProto* g = model.mutable_graph();
    g->set_name("qdq_linear");
    AddValueInfo(g->add_input(), "x", {m, k});
    AddValueInfo(g->add_output(), "y", {m, n});
    AddInitializer<float>(g, "sx", onnx::TensorProto::FLOAT, {}, {sx});
    AddInitializer<uint8_t>(g, "zx", onnx::TensorProto::UINT8, {}, {zx});
    AddNode(g, "QuantizeLinear", {"x", "sx", "zx"}, "xq");
    AddNode(g, "DequantizeLinear", {"xq", "sx", "zx"}, "xd");
    const std::vector<int64_t> w_dims = gemm ? std::vector<int64_t>{n, k} : std::vector{k, n};
    const std::vector<int64_t> s_dims =
        sw.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{n};
    AddInitializer<float>(g, "sw", onnx::TensorProto::FLOAT, s_dims, sw);
    if (w_type == onnx::TensorProto::INT8) {
      AddInitializer<int8_t>(g, "w", w_type, w_dims, std::vector<int8_t>(w.begin(), w.end()));
      AddInitializer<int8_t>(g, "zw", w_type, s_dims,
                             std::vector<int8_t>(sw.size(), static_cast<int8_t>(zw)));
    } else {
      AddInitializer<uint8_t>(g, "w", w_type, w_dims, std::vector<uint8_t>(w.begin(), w.end()));
      AddInitializer<uint8_t>(g, "zw", w_type, s_dims,
                              std::vector<uint8_t>(sw.size(), static_cast<uint8_t>(zw)));
    }
    onnx::NodeProto* dq = AddNode(g, "DequantizeLinear", {"w", "sw", "zw"}, "wd");
    SetInt(dq, "axis", gemm ? 0 : 1);
    if (gemm) {
      AddInitializer<float>(g, "b", onnx::TensorProto::FLOAT, {n}, bias);
      onnx::NodeProto* op = AddNode(g, "Gemm", {"xd", "wd", "b"}, "y");
      SetInt(op, "transB", 1);
      if (alpha != 1) {
        onnx::AttributeProto* a = op->add_attribute();
        a->set_name("alpha");
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(alpha);
      }
    } else {
      AddNode(g, "MatMul", {"xd", "wd"}, "y");
    }
    return model.SerializeAsString();
  }

  // ONNX's definition in double: quantise x, dequantise both, multiply.
  // `magnitude` gets each output's sum of |terms|, the scale of its rounding.
  std::vector<double> Reference(const std::vector<float>& x, std::vector<double>& magnitude) const {
    std::vector<double> y(m * n);
    magnitude.assign(m * n, 0);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = 0; col < n; ++col) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double q = std::clamp(std::nearbyint(x[r * k + kk] / sx) + zx, 0.0f, 255.0f);
          const double s = sw.size() == 1 ? sw[0] : sw[col];
          const double term = (q - zx) * double(sx) * (w[WeightIndex(kk, col)] - zw) * s;
          acc += term;
          magnitude[r * n + col] += std::fabs(term);
        }
        y[r * n + col] = alpha * acc + (gemm ? bias[col] : 0.0);
      }
    }
    return y;
  }
};

std::vector<int32_t> Integers(int64_t count, int32_t low, int32_t high, uint32_t seed) {
  std::vector<int32_t> v(count);
  for (auto& e : v) {
    seed = seed * 1664525u + 1013904223u;
    e = low + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(high - low + 1));
  }
  return v;
}

// Compiles `model`, runs it on x, compares with its reference (within
// float32 roundings of the terms) and returns the compiled kernels' loop nests.
std::string CheckAgainstReference(const QdqLinear& model) {
  std::vector<float> x(model.m * model.k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 6.0f;
  auto graph = ImportOnnxModel(model.Model(), OpRegistry::Default(), {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return "";
  auto lowered = CompileGraph(graph->Clone(), CompileOptions{});
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  std::string nests;
  if (lowered.ok()) {
    for (const KernelSpec& k : lowered->kernels) nests += lower::LoopFunctionToString(k.function);
  }
  auto manager = engine::ModelManager::Create({});
  EXPECT_TRUE(manager.ok());
  EXPECT_TRUE((*manager)->Compile("q", *std::move(graph), CompileOptions{}).ok());
  auto input = runtime::Tensor::FromBytes(
      {DType::kFloat32, {model.m, model.k}},
      absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  EXPECT_TRUE(input.ok());
  auto result = (*manager)->Find("q")->Run({&*input});
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return nests;
  const float* y = static_cast<const float*>(result->outputs[0].data());
  std::vector<double> magnitude;
  const std::vector<double> want = model.Reference(x, magnitude);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(y[i], want[i], 1e-6 * std::max(1.0, magnitude[i])) << "at " << i;
  }
  return nests;
}

TEST(OnnxQuantizedConvertersTest, QdqGemmMultipliesIntegersWithInt8Weights) {
  QdqLinear model;
  model.w = Integers(model.n * model.k, -128, 127, 1);
  model.sw.resize(model.n);
  for (int64_t i = 0; i < model.n; ++i) model.sw[i] = 0.01f + 0.001f * static_cast<float>(i);
  model.bias.resize(model.n);
  for (int64_t i = 0; i < model.n; ++i) model.bias[i] = 0.5f - 0.05f * static_cast<float>(i);
  EXPECT_THAT(CheckAgainstReference(model), HasSubstr("] stored int8"));
}

// uint8 weights less a zero point of 100 span [-100, 155]: int16 panels.
TEST(OnnxQuantizedConvertersTest, QdqMatMulWithWeightZeroPointUsesInt16Weights) {
  QdqLinear model;
  model.gemm = false;
  model.w_type = onnx::TensorProto::UINT8;
  model.w = Integers(model.n * model.k, 0, 255, 2);
  model.zw = 100;
  model.sw = {0.02f};
  EXPECT_THAT(CheckAgainstReference(model), HasSubstr("] stored int16"));
}

// alpha != 1 leaves the pattern: the dequantised product, still right.
TEST(OnnxQuantizedConvertersTest, GemmWithAlphaKeepsTheDequantisedProduct) {
  QdqLinear model;
  model.alpha = 0.5f;
  model.w = Integers(model.n * model.k, -128, 127, 3);
  model.sw = {0.03f};
  model.bias.assign(model.n, 0.25f);
  EXPECT_THAT(CheckAgainstReference(model), ::testing::Not(HasSubstr("stored int")));
}

}  // namespace
}  // namespace kiln
