#include "compiler/passes/requantize_in_kernel.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir/element_access.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/integer_qdq_conv.h"
#include "compiler/passes/integer_qdq_matmul.h"
#include "compiler/passes/qdq_operands.h"
#include "compiler/passes/simplify_fake_quant.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

constexpr int64_t kC = 4, kH = 6, kW = 5, kO = 3;
constexpr float kXScale = 0.05f, kXZero = 128, kYScale = 0.0371f;

struct Case {
  bool relu = true;
  bool int8_out = false;  // the conv's output quantised to int8, not uint8
  float y_zero = 9;
  std::vector<float> weights;  // (kO, kC, 3, 3) integers
  std::vector<double> scale;   // per channel, float64 (kept as ConstantData::exact)
  std::vector<double> bias;
};

Case RandomCase(uint32_t seed) {
  Case k;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> weight(-128, 127);
  for (int64_t i = 0; i < kO * kC * 9; ++i) k.weights.push_back(weight(rng));
  std::uniform_real_distribution<double> u(1e-4, 1e-3);
  for (int64_t i = 0; i < kO; ++i) {
    // x_scale * w_scale: exact in float64, rounded in float32.
    k.scale.push_back(double{kXScale} * static_cast<float>(u(rng)));
    k.bias.push_back(static_cast<float>(u(rng) * 2000 - 1) * double{static_cast<float>(u(rng))});
  }
  return k;
}

// Q(x) -> DQ -> conv -> scale and bias -> relu? -> Q -> DQ, as the importer
// builds it (the scale and bias constants keeping their float64 values), then
// (unless `raw`) SimplifyFakeQuant and IntegerQdqConv as the pipeline runs them.
Graph QdqConv(const Case& k, bool second_float_reader = false, bool requantised = true,
              bool raw = false) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, kC, kH, kW}});
  Node* q = Op(g, "round", {Op(g, "div", {x, g.AddConstant("xs", FloatValues({}, {kXScale}))})});
  q = Op(g, "clip", {Op(g, "add", {q, g.AddConstant("xz", FloatValues({}, {kXZero}))})},
         ActivationAttrs{0, 255});
  Node* back =
      Op(g, "cast", {Op(g, "cast", {q}, CastAttrs{DType::kUInt8})}, CastAttrs{DType::kFloat32});
  Node* centered = Op(g, "sub", {back, g.AddConstant("xz2", FloatValues({}, {kXZero}))});
  Conv2DAttrs a;
  a.padding = {1, 1, 1, 1};
  Node* acc =
      Op(g, "conv2d", {centered, g.AddConstant("w", FloatValues({kO, kC, 3, 3}, k.weights))}, a);
  Node* y = Op(g, "mul", {acc, g.AddConstant("s", MakeExactConstant({kO, 1, 1}, k.scale))});
  y = Op(g, "add", {y, g.AddConstant("b", MakeExactConstant({kO, 1, 1}, k.bias))});
  if (k.relu) y = Op(g, "relu", {y});
  if (second_float_reader) g.AddOutput(y);
  if (!requantised) {
    g.AddOutput(y);
  } else {
    Node* r = Op(g, "round", {Op(g, "div", {y, g.AddConstant("ys", FloatValues({}, {kYScale}))})});
    r = Op(g, "add", {r, g.AddConstant("yz", FloatValues({}, {k.y_zero}))});
    r = Op(g, "clip", {r}, k.int8_out ? ActivationAttrs{-128, 127} : ActivationAttrs{0, 255});
    Node* out =
        Op(g, "cast", {Op(g, "cast", {r}, CastAttrs{k.int8_out ? DType::kInt8 : DType::kUInt8})},
           CastAttrs{DType::kFloat32});
    out = Op(g, "sub", {out, g.AddConstant("yz2", FloatValues({}, {k.y_zero}))});
    g.AddOutput(Op(g, "mul", {out, g.AddConstant("ys2", FloatValues({}, {kYScale}))}));
  }
  EXPECT_TRUE(InferTypes(g).ok());
  if (raw) return g;
  EXPECT_TRUE(CreateSimplifyFakeQuantPass()->Run(g, PassContext{}).ok());
  absl::StatusOr<bool> integer = CreateIntegerQdqConvPassForTest(true)->Run(g, PassContext{});
  EXPECT_TRUE(integer.ok() && *integer);
  return g;
}

const Node* FindOp(const Graph& g, const std::string& op) {
  for (const Node* n : g.AllNodes()) {
    if (n->is_op() && n->op_name() == op) return n;
  }
  return nullptr;
}

std::vector<double> Values(const Node* constant) {
  std::vector<double> out(constant->type.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = ReadElementAsDouble(constant->type.dtype, constant->value->bytes.data(),
                                 static_cast<int64_t>(i));
  }
  return out;
}

TEST(RequantizeInKernelTest, TheConvStoresItsRequantisedUint8) {
  const Case k = RandomCase(1);
  Graph g = QdqConv(k);
  absl::StatusOr<bool> changed = CreateRequantizeInKernelPass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const Node* q = FindOp(g, "qconv2d_u8s8");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->inputs.size(), 7u);
  EXPECT_EQ(q->type, (TensorType{DType::kUInt8, {1, kO, kH, kW}}));
  // The float64 scale and bias are the exact ones, not their float32 roundings.
  EXPECT_EQ(Values(q->inputs[3]), k.scale);
  EXPECT_EQ(Values(q->inputs[4]), k.bias);
  EXPECT_NE(static_cast<double>(static_cast<float>(k.scale[0])), k.scale[0]);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Values(q->inputs[6]),
            (std::vector<double>{double{kYScale}, 0, inf, double{k.y_zero}, 0, 255}));
  // Nothing of the float32 requantisation is left: the DQ, SimplifyFakeQuant's
  // select, reads the uint8 widened.
  EXPECT_EQ(FindOp(g, "relu"), nullptr);
  const Node* select = g.outputs()[0]->inputs[0]->inputs[0];  // mul(sub(select, zp), s)
  ASSERT_EQ(select->op_name(), "where");
  EXPECT_EQ(select->inputs[1]->op_name(), "cast");
  EXPECT_EQ(select->inputs[1]->inputs[0], q);
  EXPECT_EQ(select->inputs[0]->inputs[0], select->inputs[1]);  // is_number
}

// int8 values are stored as uint8 with 128 added; their readers subtract it.
TEST(RequantizeInKernelTest, Int8OutputsAreStoredWith128Added) {
  Case k = RandomCase(2);
  k.relu = false;
  k.int8_out = true;
  k.y_zero = -3;
  Graph g = QdqConv(k);
  absl::StatusOr<bool> changed = CreateRequantizeInKernelPass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* q = FindOp(g, "qconv2d_u8s8");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->inputs.size(), 7u);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Values(q->inputs[6]), (std::vector<double>{double{kYScale}, -inf, inf, 125, 0, 255}));
}

TEST(RequantizeInKernelTest, LeavesAProductWithASecondFloatReader) {
  Graph g = QdqConv(RandomCase(3), /*second_float_reader=*/true);
  absl::StatusOr<bool> changed = CreateRequantizeInKernelPass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(FindOp(g, "qconv2d_u8s8")->inputs.size(), 6u);
}

TEST(RequantizeInKernelTest, LeavesAProductThatIsNotRequantised) {
  Graph g = QdqConv(RandomCase(4), false, /*requantised=*/false);
  absl::StatusOr<bool> changed = CreateRequantizeInKernelPass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(FindOp(g, "qconv2d_u8s8")->type.dtype, DType::kFloat32);
}

// Q(x) -> DQ -> matmul -> scale and bias -> Q -> DQ, through
// IntegerQdqMatMul: the matmul requantises too, per column.
TEST(RequantizeInKernelTest, TheMatMulStoresItsRequantisedUint8) {
  constexpr int64_t m = 3, kk = 8, n = 5;
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {m, kk}});
  Node* q = Op(g, "round", {Op(g, "div", {x, g.AddConstant("xs", FloatValues({}, {kXScale}))})});
  q = Op(g, "clip", {q}, ActivationAttrs{0, 255});
  Node* back =
      Op(g, "cast", {Op(g, "cast", {q}, CastAttrs{DType::kUInt8})}, CastAttrs{DType::kFloat32});
  std::vector<float> w(kk * n);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<int>(i * 37) % 255 - 127);
  Node* y = Op(g, "matmul", {back, g.AddConstant("w", FloatValues({kk, n}, w))});
  const std::vector<double> scale{1e-3 / 3, 2e-3 / 3, 3e-3 / 7, 1e-4, 5e-4 / 9};
  y = Op(g, "mul", {y, g.AddConstant("s", MakeExactConstant({n}, scale))});
  Node* r = Op(g, "round", {Op(g, "div", {y, g.AddConstant("ys", FloatValues({}, {kYScale}))})});
  r = Op(g, "clip", {r}, ActivationAttrs{0, 255});
  g.AddOutput(
      Op(g, "cast", {Op(g, "cast", {r}, CastAttrs{DType::kUInt8})}, CastAttrs{DType::kFloat32}));
  ASSERT_TRUE(InferTypes(g).ok());
  ASSERT_TRUE(CreateSimplifyFakeQuantPass()->Run(g, PassContext{}).ok());
  absl::StatusOr<bool> integer = CreateIntegerQdqMatMulPassForTest(true)->Run(g, PassContext{});
  ASSERT_TRUE(integer.ok() && *integer);
  absl::StatusOr<bool> changed = CreateRequantizeInKernelPass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* product = FindOp(g, "qmatmul_u8s8");
  ASSERT_NE(product, nullptr);
  ASSERT_EQ(product->inputs.size(), 6u);
  EXPECT_EQ(product->type, (TensorType{DType::kUInt8, {m, n}}));
  EXPECT_EQ(Values(product->inputs[3]), scale);
  const Node* select = g.outputs()[0];  // where(v == v, v, 0), v = cast<f32>(the uint8 output)
  ASSERT_EQ(select->op_name(), "where");
  EXPECT_EQ(select->inputs[1]->inputs[0], product);
}

// Compiled and run (default pipeline): the output equals a float64
// reference of the fake-quant graph exactly, where the host runs the
// integer kernels.
TEST(RequantizeInKernelTest, CompiledConvMatchesAFloat64Reference) {
  if (!HostHasVnni()) GTEST_SKIP() << "the integer QDQ passes need AVX512-VNNI";
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  int models = 0;
  for (const auto& [relu, int8_out, y_zero] :
       {std::tuple{true, false, 0.0f}, {false, false, 128.0f}, {false, true, -7.0f}}) {
    SCOPED_TRACE(absl::StrCat("relu ", relu, " int8 ", int8_out, " zero ", y_zero));
    Case k = RandomCase(10 + models);
    k.relu = relu;
    k.int8_out = int8_out;
    k.y_zero = y_zero;
    std::vector<float> x(kC * kH * kW);
    std::mt19937 rng(models);
    std::uniform_real_distribution<float> u(-6, 6);
    for (float& v : x) v = u(rng);
    std::vector<float> want(kO * kH * kW);
    for (int64_t o = 0; o < kO; ++o) {
      for (int64_t oy = 0; oy < kH; ++oy) {
        for (int64_t ox = 0; ox < kW; ++ox) {
          double t = 0;
          for (int64_t ci = 0; ci < kC; ++ci) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t y = oy + ky - 1, xx = ox + kx - 1;
                if (y < 0 || y >= kH || xx < 0 || xx >= kW) continue;
                const double v = x[(ci * kH + y) * kW + xx];
                const double xq =
                    std::fmin(std::fmax(std::nearbyint(v / kXScale) + kXZero, 0), 255);
                t += (xq - kXZero) * k.weights[((o * kC + ci) * 3 + ky) * 3 + kx];
              }
            }
          }
          t = t * k.scale[o] + k.bias[o];
          if (relu) t = std::fmax(t, 0);
          const double yq =
              std::fmin(std::fmax(std::nearbyint(t / kYScale) + y_zero, int8_out ? -128 : 0),
                        int8_out ? 127 : 255);
          want[(o * kH + oy) * kW + ox] = static_cast<float>((yq - y_zero) * kYScale);
        }
      }
    }
    const std::string name = "m" + std::to_string(models++);
    Graph g = QdqConv(k, false, true, /*raw=*/true);
    auto compiled = (*manager)->Compile(name, std::move(g), CompileOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto in = Tensor::FromBytes(
        {DType::kFloat32, {1, kC, kH, kW}},
        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
    ASSERT_TRUE(in.ok());
    auto result = (*manager)->Find(name)->Run({&*in});
    ASSERT_TRUE(result.ok()) << result.status();
    const float* got = static_cast<const float*>(result->outputs[0].data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
  }
}

}  // namespace
}  // namespace kiln
