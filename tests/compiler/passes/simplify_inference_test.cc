// SimplifyInference's erf(x / c) -> erf(x * (1 / c)): where it applies, and
// GELU as PyTorch exports it, fused into a matmul's epilogue, against float64.
#include "compiler/passes/simplify_inference.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/passes/infer_type.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

// PyTorch's export of sqrt(2): the float32 nearest it.
const float kSqrt2 = static_cast<float>(std::sqrt(2.0));

Node* Scalar(Graph& g, float v, std::vector<int64_t> shape = {}) {
  static int counter = 0;
  return g.AddConstant("c" + std::to_string(counter++), FloatValues(std::move(shape), {v}));
}

// Runs the pass on `g` (typed first); returns whether it changed the graph.
bool RunPass(Graph& g) {
  EXPECT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = CreateSimplifyInferencePass()->Run(g, PassContext{});
  EXPECT_TRUE(changed.ok()) << changed.status();
  return changed.ok() && *changed;
}

TEST(SimplifyInferenceTest, ErfOfXOverSqrt2MultipliesBySqrtOneHalf) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {4, 8}});
    g.AddOutput(Op(g, "erf", {Op(g, "div", {x, Scalar(g, kSqrt2, shape)})}));
    EXPECT_TRUE(RunPass(g));
    const Node* mul = g.outputs()[0]->inputs[0];
    ASSERT_EQ(mul->op_name(), "mul");
    EXPECT_EQ(mul->inputs[0], x);
    ASSERT_TRUE(mul->inputs[1]->is_constant());
    EXPECT_EQ(mul->inputs[1]->type.shape, shape);
    // The float PyTorch's own GELU multiplies by (M_SQRT1_2).
    EXPECT_EQ(mul->inputs[1]->value->data<float>()[0], static_cast<float>(std::sqrt(0.5)));
    EXPECT_EQ(mul->type, (TensorType{DType::kFloat32, {4, 8}}));
  }
}

// Elsewhere a division by a constant keeps its correctly rounded quotient.
TEST(SimplifyInferenceTest, OtherDivisionsStay) {
  {  // the quotient is also used by something other than erf
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {8}});
    Node* div = Op(g, "div", {x, Scalar(g, kSqrt2)});
    g.AddOutput(Op(g, "add", {Op(g, "erf", {div}), div}));
    EXPECT_FALSE(RunPass(g));
  }
  {  // the quotient is a graph output
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {8}});
    Node* div = Op(g, "div", {x, Scalar(g, kSqrt2)});
    g.AddOutput(Op(g, "erf", {div}));
    g.AddOutput(div);
    EXPECT_FALSE(RunPass(g));
  }
  {  // not feeding erf
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {8}});
    g.AddOutput(Op(g, "tanh", {Op(g, "div", {x, Scalar(g, kSqrt2)})}));
    EXPECT_FALSE(RunPass(g));
  }
  {  // a divisor that is not a one-element constant, or zero, or the dividend constant
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {2}});
    Node* y = g.AddInput("y", {DType::kFloat32, {2}});
    g.AddOutput(Op(g, "erf", {Op(g, "div", {x, y})}));
    g.AddOutput(Op(g, "erf", {Op(g, "div", {x, g.AddConstant("v", FloatValues({2}, {2, 3}))})}));
    g.AddOutput(Op(g, "erf", {Op(g, "div", {x, Scalar(g, 0.0f)})}));
    g.AddOutput(Op(g, "erf", {Op(g, "div", {Scalar(g, kSqrt2), x})}));
    EXPECT_FALSE(RunPass(g));
  }
}

// y = gelu(x W + b) with GELU as PyTorch exports it, x * 0.5 * (1 + erf(x /
// 1.41421)), compiled by the whole pipeline (the GELU fuses into the
// matmul's epilogue) against float64.
TEST(SimplifyInferenceTest, GeluInAMatmulEpilogueMatchesFloat64) {
  const int64_t m = 37, k = 24, n = 64;
  std::vector<float> x(m * k), w(k * n), bias(n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.3f * std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.9f * std::cos(0.11f * static_cast<float>(i));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i) - 3.2f;
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
  Node* h = Op(g, "add",
               {Op(g, "matmul", {in, g.AddConstant("w", FloatValues({k, n}, w))}),
                g.AddConstant("b", FloatValues({n}, bias))});
  Node* erf = Op(g, "erf", {Op(g, "div", {h, Scalar(g, kSqrt2)})});
  g.AddOutput(
      Op(g, "mul", {Op(g, "mul", {h, Op(g, "add", {erf, Scalar(g, 1.0f)})}), Scalar(g, 0.5f)}));

  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto compiled = (*manager)->Compile("gelu", std::move(g), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->kernels.size(), 1u);
  EXPECT_THAT(compiled->kernels[0].ops, ::testing::Contains("erf"));
  EXPECT_THAT(compiled->kernels[0].ops, ::testing::Not(::testing::Contains("div")));
  auto input = Tensor::FromBytes(
      {DType::kFloat32, {m, k}},
      absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("gelu")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const float* got = static_cast<const float*>(result->outputs[0].data());
  int negative_tail = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias[j], mag = std::fabs(bias[j]);
      for (int64_t q = 0; q < k; ++q) {
        acc += double{x[i * k + q]} * w[q * n + j];
        mag += std::fabs(double{x[i * k + q]} * w[q * n + j]);
      }
      const double want = acc * 0.5 * (1 + std::erf(acc / std::sqrt(2.0)));
      // erf's error (3.6e-7 absolute) times h / 2, the multiply by 1 / sqrt 2
      // and the rounding of the products (a few ulp of gelu), and the float
      // sum's own error (k ulp of the magnitudes) times gelu's slope (<= 1.13).
      const double tol =
          0.5 * std::fabs(acc) * 3.6e-7 + 5e-7 * std::fabs(want) + 1.2 * k * 6e-8 * mag;
      negative_tail += acc < -4;
      ASSERT_NEAR(got[i * n + j], want, tol) << "row " << i << " col " << j << " h " << acc;
    }
  }
  EXPECT_GT(negative_tail, 0);  // the sweep reaches erf's tail too
}

}  // namespace
}  // namespace kiln
