#include "compiler/passes/quantize_in_float64.h"

#include <cmath>
#include <cstdint>
#include <string>
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

// Scales under which float32 rounds 2 of the 65536 pairs otherwise, whether
// or not it fuses either product into an FMA (found by a search over random
// float32 scales; most have no such pair).
constexpr float kSa = 0.0423808247f, kSb = 0.0677362233f, kYs = 0.0442883372f;
constexpr float kZa = 128, kZb = 3, kZy = 0;

Node* Scalar(Graph& g, const std::string& name, float v) {
  return g.AddConstant(name, FloatValues({}, {v}));
}

// DQ(a) + DQ(b) -> relu -> Q -> DQ, with a and b every pair of uint8 values
// (a (256, 1), b (1, 256)), as a QDQ resnet's residual add imports.
Graph ResidualAdd() {
  Graph g;
  Node* a = g.AddInput("a", {DType::kUInt8, {256, 1}});
  Node* b = g.AddInput("b", {DType::kUInt8, {1, 256}});
  Node* da =
      Op(g, "mul",
         {Op(g, "sub", {Op(g, "cast", {a}, CastAttrs{DType::kFloat32}), Scalar(g, "za", kZa)}),
          Scalar(g, "sa", kSa)});
  Node* db =
      Op(g, "mul",
         {Op(g, "sub", {Op(g, "cast", {b}, CastAttrs{DType::kFloat32}), Scalar(g, "zb", kZb)}),
          Scalar(g, "sb", kSb)});
  Node* y = Op(g, "relu", {Op(g, "add", {da, db})});
  Node* q = Op(g, "round", {Op(g, "div", {y, Scalar(g, "ys", kYs)})});
  q = Op(g, "clip", {Op(g, "add", {q, Scalar(g, "zy", kZy)})}, ActivationAttrs{0, 255});
  g.AddOutput(q);
  EXPECT_TRUE(InferTypes(g).ok());
  return g;
}

const Node* FindOp(const Graph& g, const std::string& op) {
  for (const Node* n : g.AllNodes()) {
    if (n->is_op() && n->op_name() == op) return n;
  }
  return nullptr;
}

TEST(QuantizeInFloat64Test, RebuildsTheChainInFloat64) {
  Graph g = ResidualAdd();
  absl::StatusOr<bool> changed = CreateQuantizeInFloat64Pass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // clip(add(cast<f32>(round(div(y64, ys64))), zp))
  const Node* back = g.outputs()[0]->inputs[0]->inputs[0];
  ASSERT_EQ(back->op_name(), "cast");
  EXPECT_EQ(back->type.dtype, DType::kFloat32);
  const Node* round = back->inputs[0];
  ASSERT_EQ(round->op_name(), "round");
  EXPECT_EQ(round->type.dtype, DType::kFloat64);
  const Node* div = round->inputs[0];
  ASSERT_EQ(div->op_name(), "div");
  EXPECT_EQ(div->inputs[0]->op_name(), "relu");
  EXPECT_EQ(div->inputs[0]->type.dtype, DType::kFloat64);
  EXPECT_EQ(div->inputs[1]->type.dtype, DType::kFloat64);
  // No float32 arithmetic is left: its nodes had no other readers.
  for (const Node* n : g.AllNodes()) {
    if (n->is_op() && (n->op_name() == "add" || n->op_name() == "mul" || n->op_name() == "sub")) {
      if (n == g.outputs()[0]->inputs[0]) continue;  // the zero point's add, on integers
      EXPECT_EQ(n->type.dtype, DType::kFloat64) << n->name;
    }
  }
}

TEST(QuantizeInFloat64Test, LeavesAChainOverAnotherOp) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {8}});
  Node* q = Op(g, "round", {Op(g, "div", {Op(g, "exp", {x}), Scalar(g, "s", kYs)})});
  g.AddOutput(Op(g, "clip", {q}, ActivationAttrs{0, 255}));
  ASSERT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = CreateQuantizeInFloat64Pass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(FindOp(g, "round")->type.dtype, DType::kFloat32);
  EXPECT_EQ(g.AllNodes().size(), 6u);  // x, exp, s, div, round, clip: nothing added
}

// A global average pool's sum and scale are rebuilt too.
TEST(QuantizeInFloat64Test, RebuildsAPoolsSum) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kUInt8, {1, 4, 3, 3}});
  Node* d = Op(g, "mul", {Op(g, "cast", {x}, CastAttrs{DType::kFloat32}), Scalar(g, "s", kSa)});
  Node* mean =
      Op(g, "mul", {Op(g, "sum", {d}, ReduceAttrs{{2, 3}, true}), Scalar(g, "ninth", 1.0f / 9)});
  g.AddOutput(Op(g, "round", {Op(g, "div", {mean, Scalar(g, "ys", kYs)})}));
  ASSERT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = CreateQuantizeInFloat64Pass()->Run(g, PassContext{});
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* sum = FindOp(g, "sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->type.dtype, DType::kFloat64);
}

// Compiled and run over every pair of uint8 values: equal to the chain in
// float64 everywhere, where float32 rounds some of them otherwise.
TEST(QuantizeInFloat64Test, CompiledChainMatchesFloat64) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  std::vector<uint8_t> values(256);
  for (int i = 0; i < 256; ++i) values[i] = static_cast<uint8_t>(i);
  int float32_differs = 0;
  std::vector<float> want(256 * 256);
  for (int i = 0; i < 256; ++i) {
    for (int j = 0; j < 256; ++j) {
      const double y = std::fmax((i - double{kZa}) * kSa + (j - double{kZb}) * kSb, 0);
      const double q = std::fmin(std::fmax(std::nearbyint(y / kYs) + kZy, 0), 255);
      want[i * 256 + j] = static_cast<float>(q);
      const float y32 = std::fmax((i - kZa) * kSa + (j - kZb) * kSb, 0.0f);
      float32_differs += std::fmin(std::fmax(std::nearbyint(y32 / kYs) + kZy, 0), 255) != q;
    }
  }
  EXPECT_GT(float32_differs, 0) << "no pair where float32 rounds otherwise: the test tests nothing";
  for (bool float64 : {true, false}) {
    SCOPED_TRACE(float64 ? "float64" : "float32");
    CompileOptions options;
    if (!float64) options.disabled_passes = {"QuantizeInFloat64"};
    const std::string name = float64 ? "f64" : "f32";
    auto compiled = (*manager)->Compile(name, ResidualAdd(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto a =
        Tensor::FromBytes({DType::kUInt8, {256, 1}},
                          absl::string_view(reinterpret_cast<const char*>(values.data()), 256));
    auto b =
        Tensor::FromBytes({DType::kUInt8, {1, 256}},
                          absl::string_view(reinterpret_cast<const char*>(values.data()), 256));
    ASSERT_TRUE(a.ok() && b.ok());
    auto result = (*manager)->Find(name)->Run({&*a, &*b});
    ASSERT_TRUE(result.ok()) << result.status();
    const float* got = static_cast<const float*>(result->outputs[0].data());
    int differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    if (float64) {
      EXPECT_EQ(differ, 0);
    } else {
      EXPECT_GT(differ, 0) << "float32 kernels matched float64 everywhere";
    }
  }
}

}  // namespace
}  // namespace kiln
