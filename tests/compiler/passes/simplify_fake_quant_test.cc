#include "compiler/passes/simplify_fake_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compiler/passes/infer_type.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

Node* Scalar(Graph& g, const std::string& name, float v) {
  return g.AddConstant(name, FloatValues({}, {v}));
}

// QuantizeLinear then DequantizeLinear as the ONNX importer builds them:
// cast<to>(clip(round(x / scale) + zp, low, high)), cast back, minus zp, times
// scale.
Node* FakeQuant(Graph& g, Node* x, float scale, float zp, DType to, float low, float high) {
  Node* q = Op(g, "round", {Op(g, "div", {x, Scalar(g, "scale", scale)})});
  q = Op(g, "clip", {Op(g, "add", {q, Scalar(g, "zp", zp)})}, ActivationAttrs{low, high});
  Node* back = Op(g, "cast", {Op(g, "cast", {q}, CastAttrs{to})}, CastAttrs{DType::kFloat32});
  return Op(g, "mul", {Op(g, "sub", {back, Scalar(g, "zp2", zp)}), Scalar(g, "scale2", scale)});
}

// Runs the pass on `g` (typed first); returns whether it changed the graph.
bool RunPass(Graph& g) {
  EXPECT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = CreateSimplifyFakeQuantPass()->Run(g, PassContext{});
  EXPECT_TRUE(changed.ok()) << changed.status();
  return changed.ok() && *changed;
}

bool HasOp(const Graph& g, const std::string& op) {
  for (const Node* n : g.TopologicalOrder()) {
    if (n->is_op() && n->op->name == op) return true;
  }
  return false;
}

TEST(SimplifyFakeQuantTest, DropsTheIntegerRoundTripOfUInt8AndInt8) {
  for (auto [to, low, high, zp] : {std::tuple{DType::kUInt8, 0.0f, 255.0f, 7.0f},
                                   std::tuple{DType::kInt8, -128.0f, 127.0f, 0.0f}}) {
    SCOPED_TRACE(DTypeName(to));
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {8}});
    g.AddOutput(FakeQuant(g, x, 0.5f, zp, to, low, high));
    EXPECT_TRUE(RunPass(g));
    EXPECT_FALSE(HasOp(g, "cast"));
    // mul(sub(where(equal(c, c), c, 0), zp), scale) with c the clip.
    const Node* where = g.outputs()[0]->inputs[0]->inputs[0];
    ASSERT_EQ(where->op_name(), "where");
    EXPECT_EQ(where->inputs[1]->op_name(), "clip");
    EXPECT_EQ(where->inputs[0]->op_name(), "equal");
    EXPECT_EQ(where->type.dtype, DType::kFloat32);
  }
}

TEST(SimplifyFakeQuantTest, KeepsCastsThatChangeValues) {
  struct Case {
    const char* what;
    DType to;
    float low, high;
    bool round;
  };
  for (const Case& c : {Case{"range wider than uint8 (wraps)", DType::kUInt8, 0, 300, true},
                        Case{"negative values into uint8", DType::kUInt8, -1, 255, true},
                        Case{"not rounded (truncates)", DType::kUInt8, 0, 255, false},
                        Case{"fractional bound", DType::kInt8, -1.5f, 127, true}}) {
    SCOPED_TRACE(c.what);
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {8}});
    Node* v = c.round ? Op(g, "round", {x}) : x;
    v = Op(g, "clip", {v}, ActivationAttrs{c.low, c.high});
    g.AddOutput(Op(g, "cast", {Op(g, "cast", {v}, CastAttrs{c.to})}, CastAttrs{DType::kFloat32}));
    EXPECT_FALSE(RunPass(g));
    EXPECT_TRUE(HasOp(g, "cast"));
  }
}

TEST(SimplifyFakeQuantTest, KeepsAFloatTypeTooNarrowForTheRange) {
  // float16 holds integers exactly up to 2048 only: 2049 would round.
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat16, {8}});
  Node* v = Op(g, "clip", {Op(g, "round", {x})}, ActivationAttrs{-32768, 32767});
  g.AddOutput(
      Op(g, "cast", {Op(g, "cast", {v}, CastAttrs{DType::kInt16})}, CastAttrs{DType::kFloat16}));
  EXPECT_FALSE(RunPass(g));
}

// Generated kernels with and without the pass against ONNX's definition,
// computed here: q = saturate(round_half_even(x / scale) + zp), NaN to 0
// (as the casts make it), y = (q - zp) * scale.
TEST(SimplifyFakeQuantTest, KernelsMatchQuantizeThenDequantize) {
  std::vector<float> x;
  for (int i = -40; i < 40; ++i) x.push_back(0.25f * static_cast<float>(i) * 3.0f);  // halves
  for (float v : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 1e30f, -1e30f,
                  63.75f, -64.25f, 0.0f, -0.0f, 2.5f}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  int models = 0;
  for (auto [to, low, high, zp] : {std::tuple{DType::kUInt8, 0.0f, 255.0f, 131.0f},
                                   std::tuple{DType::kInt8, -128.0f, 127.0f, -3.0f}}) {
    const float scale = 0.5f;
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      const float q = std::isnan(x[i])
                          ? 0.0f
                          : std::min(std::max(std::nearbyint(x[i] / scale) + zp, low), high);
      want[i] = (q - zp) * scale;
    }
    for (bool simplify : {true, false}) {
      SCOPED_TRACE(std::string(DTypeName(to)) + (simplify ? " simplified" : " as imported"));
      Graph g;
      const TensorType type{DType::kFloat32, {n}};
      g.AddOutput(FakeQuant(g, g.AddInput("x", type), scale, zp, to, low, high));
      CompileOptions options;
      if (!simplify) options.disabled_passes = {"SimplifyFakeQuant"};
      const std::string name = "m" + std::to_string(models++);
      auto compiled = (*manager)->Compile(name, std::move(g), options);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      auto in = Tensor::FromBytes(
          type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
      ASSERT_TRUE(in.ok());
      auto result = (*manager)->Find(name)->Run({&*in});
      ASSERT_TRUE(result.ok()) << result.status();
      const float* got = static_cast<const float*>(result->outputs[0].data());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "x = " << x[i];
    }
  }
}

}  // namespace
}  // namespace kiln
