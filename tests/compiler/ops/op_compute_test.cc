// Each op's compute definition, evaluated on the host (the evaluator that
// FoldConstant uses), against values worked out by hand.
#include <cmath>

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

// Folds `build`'s single output (all inputs are constants) and returns its values.
std::vector<float> Fold(const std::function<Node*(Graph&)>& build, TensorType* type = nullptr) {
  Graph g;
  g.AddInput("unused", {DType::kFloat32, {1}});
  g.AddOutput(build(g));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  const ValueSpec& out = p->program.values[p->program.outputs[0]];
  EXPECT_EQ(out.kind, ValueSpec::Kind::kConstant);
  if (type) *type = out.type;
  const float* d = out.constant->data<float>();
  return std::vector<float>(d, d + out.type.NumElements());
}

TEST(OpComputeTest, AddBroadcastsLikeNumPy) {
  auto v = Fold([](Graph& g) {
    return testing::Op(g, "add", {g.AddConstant("a", FloatValues({2, 1}, {1, 2})),
                                  g.AddConstant("b", FloatValues({3}, {10, 20, 30}))});
  });
  EXPECT_THAT(v, ElementsAre(11, 21, 31, 12, 22, 32));
}

TEST(OpComputeTest, DenseMultipliesByTransposedWeightAndAddsBias) {
  // x = [[1, 2]], W = [[1, 0], [0, 1], [1, 1]] (N=3, K=2), b = [0.5, 0, -1].
  auto v = Fold([](Graph& g) {
    return testing::Op(g, "dense", {g.AddConstant("x", FloatValues({1, 2}, {1, 2})),
                                    g.AddConstant("w", FloatValues({3, 2}, {1, 0, 0, 1, 1, 1})),
                                    g.AddConstant("b", FloatValues({3}, {0.5f, 0, -1}))});
  });
  EXPECT_THAT(v, ElementsAre(1.5f, 2.0f, 2.0f));
}

TEST(OpComputeTest, MatmulUsesWeightAsKByN) {
  auto v = Fold([](Graph& g) {
    return testing::Op(g, "matmul", {g.AddConstant("x", FloatValues({1, 2}, {1, 2})),
                                     g.AddConstant("w", FloatValues({2, 2}, {1, 2, 3, 4}))});
  });
  EXPECT_THAT(v, ElementsAre(7, 10));
}

TEST(OpComputeTest, SoftmaxNormalisesTheLastAxis) {
  auto v = Fold([](Graph& g) {
    return testing::Op(g, "softmax", {g.AddConstant("x", FloatValues({1, 3}, {1, 2, 3}))},
                       AxisAttrs{-1});
  });
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_THAT(v, Pointwise(FloatNear(1e-6), std::vector<float>{
                                                static_cast<float>(std::exp(1.0) / s),
                                                static_cast<float>(std::exp(2.0) / s),
                                                static_cast<float>(std::exp(3.0) / s)}));
}

// One query, two keys, all three operands views of one buffer [1, 0, ln 3,
// 4, 8]: scores (0, ln 3) give weights (1/4, 3/4) and 1 + 6 = 7; masking
// the second key leaves the first's value, 4.
TEST(OpComputeTest, AttentionReadsItsViewsAndWeighsTheValues) {
  for (bool masked : {false, true}) {
    auto v = Fold([masked](Graph& g) {
      Node* buffer = g.AddConstant("x", FloatValues({5}, {1, 0, std::log(3.0f), 4, 8}));
      AttentionAttrs a;
      a.t = 2;
      a.out_shape = {1, 1, 1};
      a.q = {0, 0, 0, 1};
      a.k = {1, 0, 0, 1};
      a.v = {3, 0, 0, 1};
      std::vector<Node*> in{buffer, buffer, buffer};
      if (masked) {
        in.push_back(g.AddConstant("m", FloatValues({1, 2}, {0, -INFINITY})));
        a.mask = {0, 0, 0, 2};
      }
      return testing::Op(g, "attention", in, a);
    });
    EXPECT_THAT(v, Pointwise(FloatNear(1e-5), {masked ? 4.0f : 7.0f}));
  }
}

// Two entries of two rows, q = 0 (even weights), values (1, 3) and (5, 7):
// every row is the mean, 2 and 6, written entry-minor ([row][entry]) by the
// out view, as a head merge places heads side by side.
TEST(OpComputeTest, AttentionWritesThroughItsOutView) {
  auto v = Fold([](Graph& g) {
    Node* buffer = g.AddConstant("x", FloatValues({5}, {0, 1, 3, 5, 7}));
    AttentionAttrs a;
    a.n2 = 2;
    a.s = 2;
    a.t = 2;
    a.out_shape = {2, 2};
    a.v = {1, 0, 2, 1};
    a.out = {0, 2, 1, 2};
    return testing::Op(g, "attention", {buffer, buffer, buffer}, a);
  });
  EXPECT_THAT(v, Pointwise(FloatNear(1e-5), {2.0f, 6.0f, 2.0f, 6.0f}));
}

TEST(OpComputeTest, TransposeAndReshapeMoveElements) {
  auto t = Fold([](Graph& g) {
    return testing::Op(g, "transpose", {g.AddConstant("x", FloatValues({2, 3}, {0, 1, 2, 3, 4, 5}))},
                       TransposeAttrs{{1, 0}});
  });
  EXPECT_THAT(t, ElementsAre(0, 3, 1, 4, 2, 5));
  TensorType type;
  auto r = Fold(
      [](Graph& g) {
        return testing::Op(g, "reshape", {g.AddConstant("x", FloatValues({2, 3}, {0, 1, 2, 3, 4, 5}))},
                           ReshapeAttrs{{3, -1}});
      },
      &type);
  EXPECT_EQ(type.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_THAT(r, ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(OpComputeTest, Conv2DWithPaddingZeroesTheBorder) {
  // 1x1x2x2 input, one 3x3 all-ones filter, padding 1: each output sums the
  // whole input (every 3x3 window covers all four pixels) = 1+2+3+4.
  auto v = Fold([](Graph& g) {
    Conv2DAttrs a;
    a.padding = {1, 1, 1, 1};
    return testing::Op(g, "conv2d", {g.AddConstant("x", FloatValues({1, 1, 2, 2}, {1, 2, 3, 4})),
                                     g.AddConstant("w", testing::FloatConstant({1, 1, 3, 3}, 1))},
                       a);
  });
  EXPECT_THAT(v, ElementsAre(10, 10, 10, 10));
}

TEST(OpComputeTest, GroupedNchwcConvReadsItsGroupsLanes) {
  // Blocks of 4 lanes, groups of 2: output lane k reads input lanes k / 2 * 2
  // and k / 2 * 2 + 1 of its own block, times weight[block][0][0][j][k].
  // Block 0: in (1, 2, 3, 4), weights j = 0: (1, 10, 100, 1000), j = 1:
  // (2, 20, 200, 2000) -> (1 + 4, 10 + 40, 300 + 800, 3000 + 8000). Block 1:
  // in (5, 6, 7, 8), weights (1, 0, 0, 1) and (0, 1, 1, 0) -> (5, 6, 8, 7).
  // Bias 0.5 on lane 0 of block 0.
  auto v = Fold([](Graph& g) {
    return testing::Op(
        g, "conv2d_nchwc_grouped",
        {g.AddConstant("x", FloatValues({1, 2, 1, 1, 4}, {1, 2, 3, 4, 5, 6, 7, 8})),
         g.AddConstant("w", FloatValues({2, 1, 1, 2, 4}, {1, 10, 100, 1000, 2, 20, 200, 2000, 1, 0,
                                                          0, 1, 0, 1, 1, 0})),
         g.AddConstant("b", FloatValues({2, 4}, {0.5f, 0, 0, 0, 0, 0, 0, 0}))},
        Conv2DAttrs{});
  });
  EXPECT_THAT(v, ElementsAre(5.5f, 50, 1100, 11000, 5, 6, 8, 7));
}

// Output extents, worked by hand: 7 rows padded 1 + 1 = 9, a 3-tap window
// dilated by 2 spans 5, stride 2: (9 - 5) / 2 + 1 = 3; 6 columns unpadded, 2
// taps: 5. A window wider than the padded input is refused naming both.
TEST(OpComputeTest, Conv2DOutputExtentsAndAWindowTooWide) {
  const OpDef* conv = OpRegistry::Default().Find("conv2d");
  Conv2DAttrs a;
  a.padding = {1, 0, 1, 0};
  a.dilation = {2, 1};
  a.strides = {2, 1};
  absl::StatusOr<TensorType> t =
      conv->infer_type({{DType::kFloat32, {1, 2, 7, 6}}, {DType::kFloat32, {4, 2, 3, 2}}}, a);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->shape, ElementsAre(1, 4, 3, 5));
  absl::StatusOr<TensorType> wide = conv->infer_type(
      {{DType::kFloat32, {1, 1, 3, 3}}, {DType::kFloat32, {1, 1, 5, 5}}}, Conv2DAttrs{});
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wide.status().message()),
              ::testing::HasSubstr("conv2d window 5 exceeds padded input 3"));
}

TEST(OpComputeTest, SumAndMaxReduceAxes) {
  auto s = Fold([](Graph& g) {
    return testing::Op(g, "sum", {g.AddConstant("x", FloatValues({2, 3}, {1, 2, 3, 4, 5, 6}))},
                       ReduceAttrs{{1}, false});
  });
  EXPECT_THAT(s, ElementsAre(6, 15));
  auto m = Fold([](Graph& g) {
    return testing::Op(g, "max", {g.AddConstant("x", FloatValues({2, 3}, {1, 9, 3, 4, 5, 6}))},
                       ReduceAttrs{{0}, true});
  });
  EXPECT_THAT(m, ElementsAre(4, 9, 6));
}

TEST(OpComputeTest, BatchNormMatchesItsFormula) {
  // One channel of two values: (x - 1) / sqrt(4 + 0) * 3 + 0.5.
  auto v = Fold([](Graph& g) {
    BatchNormAttrs a;
    a.epsilon = 0;
    return testing::Op(g, "batch_norm",
                       {g.AddConstant("x", FloatValues({1, 1, 2}, {1, 5})),
                        g.AddConstant("gamma", FloatValues({1}, {3})),
                        g.AddConstant("beta", FloatValues({1}, {0.5f})),
                        g.AddConstant("mean", FloatValues({1}, {1})),
                        g.AddConstant("var", FloatValues({1}, {4}))},
                       a);
  });
  EXPECT_THAT(v, ElementsAre(0.5f, 6.5f));
}

TEST(OpComputeTest, UnaryOpsMatchLibm) {
  const std::vector<float> x{-1.5f, 0.0f, 2.0f};
  auto run = [&](const std::string& op) {
    return Fold([&](Graph& g) { return testing::Op(g, op, {g.AddConstant("x", FloatValues({3}, x))}); });
  };
  EXPECT_THAT(run("relu"), ElementsAre(0, 0, 2));
  std::vector<float> sig, th, ex;
  for (float f : x) {
    sig.push_back(1.0f / (1.0f + std::exp(-f)));
    th.push_back(std::tanh(f));
    ex.push_back(std::exp(f));
  }
  EXPECT_THAT(run("sigmoid"), Pointwise(FloatNear(1e-6), sig));
  EXPECT_THAT(run("tanh"), Pointwise(FloatNear(1e-6), th));
  EXPECT_THAT(run("exp"), Pointwise(FloatNear(1e-5), ex));
}

}  // namespace
}  // namespace kiln
