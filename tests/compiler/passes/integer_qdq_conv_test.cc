#include "compiler/passes/integer_qdq_conv.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compiler/passes/infer_type.h"
#include "compiler/passes/simplify_fake_quant.h"
#include "compiler/passes/qdq_operands.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

struct ConvCase {
  int64_t c = 5, h = 9, w = 7, o = 6, kh = 3, kw = 3;
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> padding{1, 1, 1, 1};
  float x_scale = 0.1f;
  float zero = 128;            // the activation's zero point
  bool int8 = false;           // activations int8 (clip to [-128, 127]), not uint8
  std::vector<float> weights;  // integers, (o, c, kh, kw)
  std::vector<float> scale;    // per output channel: x_scale * w_scale
  std::vector<float> bias;
};

ConvCase RandomCase(uint32_t seed, float zero) {
  ConvCase k;
  k.zero = zero;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> weight(-128, 127);
  for (int64_t i = 0; i < k.o * k.c * k.kh * k.kw; ++i) k.weights.push_back(weight(rng));
  std::uniform_real_distribution<float> u(0.001f, 0.01f);
  for (int64_t i = 0; i < k.o; ++i) {
    k.scale.push_back(u(rng));
    k.bias.push_back(u(rng) * 100 - 0.5f);
  }
  return k;
}

// A QDQ conv as the ONNX importer builds it (QuantizeLinear, DequantizeLinear,
// the centered weight folded, the accumulator scaled per channel, the bias
// added), then SimplifyFakeQuant, as the pipeline runs it before the pass.
Graph QdqConv(const ConvCase& k) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, k.c, k.h, k.w}});
  Node* q = Op(g, "round", {Op(g, "div", {x, g.AddConstant("xs", FloatValues({}, {k.x_scale}))})});
  q = Op(g, "add", {q, g.AddConstant("zp", FloatValues({}, {k.zero}))});
  q = Op(g, "clip", {q}, k.int8 ? ActivationAttrs{-128, 127} : ActivationAttrs{0, 255});
  Node* back = Op(g, "cast", {Op(g, "cast", {q}, CastAttrs{k.int8 ? DType::kInt8 : DType::kUInt8})},
                  CastAttrs{DType::kFloat32});
  Node* centered = Op(g, "sub", {back, g.AddConstant("zp2", FloatValues({}, {k.zero}))});
  Node* w = g.AddConstant("w", FloatValues({k.o, k.c, k.kh, k.kw}, k.weights));
  Conv2DAttrs a;
  a.strides = k.strides;
  a.padding = k.padding;
  Node* acc = Op(g, "conv2d", {centered, w}, a);
  Node* y = Op(g, "mul", {acc, g.AddConstant("s", FloatValues({k.o, 1, 1}, k.scale))});
  g.AddOutput(Op(g, "add", {y, g.AddConstant("b", FloatValues({k.o, 1, 1}, k.bias))}));
  EXPECT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> simplified = CreateSimplifyFakeQuantPass()->Run(g, PassContext{});
  EXPECT_TRUE(simplified.ok() && *simplified);
  return g;
}

absl::StatusOr<bool> RunPass(Graph& g, bool vnni) {
  return CreateIntegerQdqConvPassForTest(vnni)->Run(g, PassContext{});
}

TEST(IntegerQdqConvTest, MakesTheConvAndItsEpilogueOneIntegerOp) {
  Graph g = QdqConv(RandomCase(1, 128));
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const Node* q = g.outputs()[0];
  ASSERT_EQ(q->op_name(), "qconv2d_u8s8");
  EXPECT_EQ(q->inputs[0]->op_name(), "cast");
  EXPECT_EQ(q->inputs[0]->type.dtype, DType::kUInt8);
  EXPECT_EQ(q->inputs[0]->inputs[0]->op_name(), "clip");
  // 5 * 3 * 3 = 45 weights per channel, padded to 48.
  EXPECT_EQ(q->inputs[1]->type, (TensorType{DType::kInt8, {6, 48}}));
  EXPECT_EQ(q->type, (TensorType{DType::kFloat32, {1, 6, 9, 7}}));
}

// A residual branch dequantises the conv's activation too: it then reads the
// uint8 tensor, so the float clip has one reader left, the cast to uint8.
TEST(IntegerQdqConvTest, OtherReadersOfTheActivationReadItsUint8) {
  Graph g = QdqConv(RandomCase(1, 128));
  Node* clip = nullptr;
  for (Node* n : g.TopologicalOrder()) {
    if (n->is_op() && n->op_name() == "clip") clip = n;
  }
  ASSERT_NE(clip, nullptr);
  Node* select = nullptr;
  for (Node* n : g.TopologicalOrder()) {
    if (n->is_op() && n->op_name() == "where") select = n;
  }
  ASSERT_NE(select, nullptr);
  g.AddOutput(Op(g, "mul", {select, g.AddConstant("s_res", FloatValues({}, {0.5f}))}));
  ASSERT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok() && *changed);
  EXPECT_EQ(g.outputs()[0]->op_name(), "qconv2d_u8s8");
  const Node* residual = g.outputs()[1]->inputs[0];
  ASSERT_EQ(residual->op_name(), "cast");
  EXPECT_EQ(residual->type.dtype, DType::kFloat32);
  EXPECT_EQ(residual->inputs[0], g.outputs()[0]->inputs[0]);  // the conv's uint8 input
  int readers_of_clip = 0;
  for (const Node* n : g.TopologicalOrder()) {
    for (const Node* in : n->inputs) readers_of_clip += in == clip;
  }
  EXPECT_EQ(readers_of_clip, 1);
}

TEST(IntegerQdqConvTest, LeavesTheGraphWithoutVnni) {
  Graph g = QdqConv(RandomCase(1, 128));
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/false);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.outputs()[0]->op_name(), "add");
}

TEST(IntegerQdqConvTest, LeavesWeightsThatAreNotInt8) {
  for (float bad : {0.5f, 128.0f, -129.0f}) {
    SCOPED_TRACE(bad);
    ConvCase k = RandomCase(2, 0);
    k.weights[7] = bad;
    Graph g = QdqConv(k);
    absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
}

// The compiled model against the integers summed here in int64: y =
// fma(float(sum (q - zero) * w), scale, bias), q the quantised input. The
// float32 path (pass disabled) must agree too, while its sums stay exact.
TEST(IntegerQdqConvTest, KernelsMatchAnIntegerReference) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  int models = 0;
  // uint8 activations, then int8 ones (read as uint8 with 128 added: the
  // padding then holds zero + 128).
  for (const auto& [zero, int8] :
       {std::pair{0.0f, false}, {128.0f, false}, {37.0f, false}, {-5.0f, true}, {127.0f, true}}) {
    for (const std::vector<int64_t>& strides : {std::vector<int64_t>{1, 1}, {2, 2}}) {
      ConvCase k = RandomCase(3 + models, zero);
      k.strides = strides;
      k.int8 = int8;
      std::vector<float> x(k.c * k.h * k.w);
      std::mt19937 rng(models);
      std::uniform_real_distribution<float> u(-15, 15);
      for (float& v : x) v = u(rng);
      const int64_t oh = (k.h + 2 - k.kh) / k.strides[0] + 1;
      const int64_t ow = (k.w + 2 - k.kw) / k.strides[1] + 1;
      std::vector<float> want(k.o * oh * ow);
      for (int64_t n = 0; n < k.o; ++n) {
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            int64_t sum = 0;
            for (int64_t ci = 0; ci < k.c; ++ci) {
              for (int64_t ky = 0; ky < k.kh; ++ky) {
                for (int64_t kx = 0; kx < k.kw; ++kx) {
                  const int64_t y = oy * k.strides[0] + ky - 1, xx = ox * k.strides[1] + kx - 1;
                  if (y < 0 || y >= k.h || xx < 0 || xx >= k.w) continue;
                  const float v = x[(ci * k.h + y) * k.w + xx];
                  const float q =
                      std::fmin(std::fmax(std::nearbyint(v / k.x_scale) + zero, int8 ? -128 : 0),
                                int8 ? 127 : 255);
                  sum += static_cast<int64_t>(q - zero) *
                         static_cast<int64_t>(k.weights[((n * k.c + ci) * k.kh + ky) * k.kw + kx]);
                }
              }
            }
            want[(n * oh + oy) * ow + ox] =
                std::fma(static_cast<float>(sum), k.scale[n], k.bias[n]);
          }
        }
      }
      for (bool integer : {true, false}) {
        SCOPED_TRACE(absl::StrCat("zero point ", zero, int8 ? " int8" : " uint8", ", stride ",
                                  strides[0], integer ? ", integer" : ", float"));
        CompileOptions options;
        if (!integer) options.disabled_passes = {"IntegerQdqConv"};
        const std::string name = "m" + std::to_string(models++);
        auto compiled = (*manager)->Compile(name, QdqConv(k), options);
        ASSERT_TRUE(compiled.ok()) << compiled.status();
        bool on_vnni = false;
        for (const engine::KernelCompileReport& kernel : compiled->kernels) {
          on_vnni |= kernel.schedule.rfind("qconv u8s8", 0) == 0;
        }
        EXPECT_EQ(on_vnni, integer && HostHasVnni());
        const TensorType type{DType::kFloat32, {1, k.c, k.h, k.w}};
        auto in = Tensor::FromBytes(
            type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
        ASSERT_TRUE(in.ok());
        auto result = (*manager)->Find(name)->Run({&*in});
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(result->outputs[0].type().NumElements(), static_cast<int64_t>(want.size()));
        const float* got = static_cast<const float*>(result->outputs[0].data());
        for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
      }
    }
  }
}

// QLinearConv's form: a uint8 input widened and centered, an int32 bias
// (integers in accumulator units) inside the conv, then the scale. The
// input is used as it is, and the bias joins the zero point's correction.
TEST(IntegerQdqConvTest, Uint8InputAndIntegerBiasMatchAnIntegerReference) {
  const int64_t c = 3, h = 6, w = 5, o = 4, zero = 77;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127), bias(-5000, 5000);
  std::vector<float> weights(o * c * 3 * 3), biases(o), scale(o);
  for (float& v : weights) v = weight(rng);
  for (float& v : biases) v = bias(rng);
  for (int64_t i = 0; i < o; ++i) scale[i] = 0.001f * static_cast<float>(i + 1);
  std::vector<uint8_t> x(c * h * w);
  for (uint8_t& v : x) v = static_cast<uint8_t>(byte(rng));
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kUInt8, {1, c, h, w}});
    Node* wide = Op(g, "cast", {in}, CastAttrs{DType::kFloat32});
    Node* centered = Op(g, "sub", {wide, g.AddConstant("zp", FloatValues({}, {zero}))});
    Conv2DAttrs a;
    a.padding = {1, 1, 1, 1};
    Node* acc = Op(g, "conv2d",
                   {centered, g.AddConstant("w", FloatValues({o, c, 3, 3}, weights)),
                    g.AddConstant("b", FloatValues({o}, biases))},
                   a);
    g.AddOutput(Op(g, "mul", {acc, g.AddConstant("s", FloatValues({o, 1, 1}, scale))}));
    EXPECT_TRUE(InferTypes(g).ok());
    return g;
  };
  Graph g = build();
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok() && *changed);
  ASSERT_EQ(g.outputs()[0]->op_name(), "qconv2d_u8s8");
  EXPECT_TRUE(g.outputs()[0]->inputs[0]->is_input());

  std::vector<float> want(o * h * w);
  for (int64_t n = 0; n < o; ++n) {
    for (int64_t oy = 0; oy < h; ++oy) {
      for (int64_t ox = 0; ox < w; ++ox) {
        int64_t sum = static_cast<int64_t>(biases[n]);
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t y = oy + ky - 1, xx = ox + kx - 1;
              if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
              sum += (int64_t{x[(ci * h + y) * w + xx]} - zero) *
                     static_cast<int64_t>(weights[((n * c + ci) * 3 + ky) * 3 + kx]);
            }
          }
        }
        want[(n * h + oy) * w + ox] = static_cast<float>(sum) * scale[n];
      }
    }
  }
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto compiled = (*manager)->Compile("qlinear", build(), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto in = Tensor::FromBytes({DType::kUInt8, {1, c, h, w}},
                              absl::string_view(reinterpret_cast<const char*>(x.data()), x.size()));
  ASSERT_TRUE(in.ok());
  auto result = (*manager)->Find("qlinear")->Run({&*in});
  ASSERT_TRUE(result.ok()) << result.status();
  const float* got = static_cast<const float*>(result->outputs[0].data());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
}

}  // namespace
}  // namespace kiln
