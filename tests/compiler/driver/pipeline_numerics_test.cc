// The optimisations change how a model is computed, never what: each graph is
// compiled at several opt levels / pass settings, run through the JIT, and
// compared with a plain reference loop or with the unoptimised compile.
#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/model_manager.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;

using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using engine::CompileResult;
using engine::ModelManager;
using runtime::Tensor;

class PipelineNumericsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Compiles `graph` under `options` and runs it on `x`.
  std::vector<float> CompileAndRun(Graph graph, const CompileOptions& options,
                                   const std::vector<float>& x, CompileResult* report = nullptr) {
    const TensorType type = graph.inputs()[0]->type;
    auto r = manager_->Compile("m", std::move(graph), options);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    if (report) *report = *r;
    auto input = Tensor::FromBytes(
        type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
    EXPECT_TRUE(input.ok());
    auto result = manager_->Find("m")->Run({&*input});
    EXPECT_TRUE(result.ok()) << result.status();
    const Tensor& out = result->outputs[0];
    const float* p = static_cast<const float*>(out.data());
    return std::vector<float>(p, p + out.type().NumElements());
  }

  std::unique_ptr<ModelManager> manager_;
};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(double(want[i])))) << "at " << i;
  }
}

// Issue 3's seed example, smaller channel count to keep the reference quick:
// y = (c + c) * 2 + conv2d(x, w); z2 = (y + c) + (y + c).
Graph SeedExample(const std::vector<float>& w, const std::vector<float>& c, int64_t ch,
                  int64_t hw) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, ch, hw, hw}});
  Node* weight = g.AddConstant("weight", FloatValues({ch, ch, 3, 3}, w));
  Node* cn = g.AddConstant("c", FloatValues({1, ch, hw - 2, hw - 2}, c));
  Node* two = g.AddConstant("two", FloatValues({}, {2.0f}));
  Node* y = Op(g, "mul", {Op(g, "add", {cn, cn}), two});
  y = Op(g, "add", {Op(g, "conv2d", {x, weight}, Conv2DAttrs{}), y});
  Node* z = Op(g, "add", {y, cn});
  Node* z1 = Op(g, "add", {y, cn});
  g.AddOutput(Op(g, "add", {z, z1}));
  return g;
}

TEST_F(PipelineNumericsTest, SeedExampleEqualsReferenceAtEverySetting) {
  const int64_t ch = 16, hw = 20;
  auto w = Pseudorandom(ch * ch * 9, 31), c = Pseudorandom(ch * (hw - 2) * (hw - 2), 32);
  auto x = Pseudorandom(ch * hw * hw, 33);
  auto conv = kiln::testing::RefConv2D(x, w, {}, 1, ch, hw, hw, ch, 3, 3);
  std::vector<float> want(conv.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float y = (c[i] + c[i]) * 2 + conv[i];
    want[i] = (y + c[i]) + (y + c[i]);
  }
  CompileOptions o2;
  CompileOptions o3;
  o3.opt_level = 3;
  CompileOptions o3_no_cse = o3;
  o3_no_cse.disabled_passes = {"EliminateCommonSubexpr"};
  CompileOptions o0;
  o0.opt_level = 0;
  for (const CompileOptions& options : {o0, o2, o3, o3_no_cse}) {
    SCOPED_TRACE(::testing::Message() << "opt_level " << options.opt_level << " disabled "
                                      << options.disabled_passes.size());
    ExpectClose(CompileAndRun(SeedExample(w, c, ch, hw), options, x), want, 1e-5);
  }
}

TEST_F(PipelineNumericsTest, BatchNormFoldedIntoConvMatchesUnfolded) {
  const int64_t ch = 8, hw = 12;
  auto w = Pseudorandom(ch * ch * 9, 41);
  auto gamma = Pseudorandom(ch, 42), beta = Pseudorandom(ch, 43), mean = Pseudorandom(ch, 44);
  auto var = Pseudorandom(ch, 45);
  for (float& v : var) v = std::fabs(v) + 0.5f;
  auto build = [&] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {1, ch, hw, hw}});
    Node* conv = Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({ch, ch, 3, 3}, w))},
                    Conv2DAttrs{});
    g.AddOutput(Op(g, "batch_norm",
                   {conv, g.AddConstant("gamma", FloatValues({ch}, gamma)),
                    g.AddConstant("beta", FloatValues({ch}, beta)),
                    g.AddConstant("mean", FloatValues({ch}, mean)),
                    g.AddConstant("var", FloatValues({ch}, var))},
                   BatchNormAttrs{1, 1e-5f}));
    return g;
  };
  auto x = Pseudorandom(ch * hw * hw, 46);
  CompileOptions unfolded;
  unfolded.opt_level = 0;
  unfolded.disabled_passes = {"SimplifyInference"};
  const std::vector<float> reference = CompileAndRun(build(), unfolded, x);

  CompileOptions o3;
  o3.opt_level = 3;
  CompileResult report;
  const std::vector<float> folded = CompileAndRun(build(), o3, x, &report);
  // Everything folded into the conv: one kernel holding only conv2d.
  ASSERT_EQ(report.kernels.size(), 1u);
  EXPECT_THAT(report.kernels[0].ops, ::testing::ElementsAre("conv2d"));
  bool fold_scale_changed = false;
  for (const PassRecord& r : report.record.passes) {
    if (r.name == "FoldScaleAxis") fold_scale_changed = r.changed;
  }
  EXPECT_TRUE(fold_scale_changed);
  ExpectClose(folded, reference, 1e-5);

  // And the unfolded graph against the formula, computed here.
  auto conv = kiln::testing::RefConv2D(x, w, {}, 1, ch, hw, hw, ch, 3, 3);
  const int64_t plane = (hw - 2) * (hw - 2);
  std::vector<float> want(conv.size());
  for (size_t i = 0; i < conv.size(); ++i) {
    const int64_t k = static_cast<int64_t>(i) / plane;
    want[i] = (conv[i] - mean[k]) / std::sqrt(var[k] + 1e-5f) * gamma[k] + beta[k];
  }
  ExpectClose(reference, want, 1e-5);
}

TEST_F(PipelineNumericsTest, DiamondFusedIntoOneKernelMatchesReference) {
  const int64_t ch = 4, hw = 10;
  auto w = Pseudorandom(ch * ch * 9, 51);
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, ch, hw, hw}});
  Node* conv = Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({ch, ch, 3, 3}, w))}, Conv2DAttrs{});
  g.AddOutput(Op(g, "add", {Op(g, "add", {Op(g, "relu", {conv}), Op(g, "tanh", {conv})}),
                            Op(g, "exp", {conv})}));
  auto xv = Pseudorandom(ch * hw * hw, 52);
  CompileResult report;
  auto got = CompileAndRun(std::move(g), CompileOptions{}, xv, &report);
  EXPECT_EQ(report.kernels.size(), 1u);
  auto conv_ref = kiln::testing::RefConv2D(xv, w, {}, 1, ch, hw, hw, ch, 3, 3);
  std::vector<float> want(conv_ref.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float v = conv_ref[i];
    want[i] = std::max(v, 0.0f) + std::tanh(v) + std::exp(v);
  }
  ExpectClose(got, want, 1e-5);
}

// Softmax written out (max, sub, exp, sum, div) over rows of 37: one kernel
// computing each row's max and sum of exps row by row, the exps once
// (fuse_ops.cc's row pair, row_stages.cc), against the reference loop.
TEST_F(PipelineNumericsTest, SoftmaxWrittenOutIsOneKernelMatchingTheReference) {
  const int64_t rows = 6, cols = 37;
  auto build = [&] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {rows, cols}});
    const ReduceAttrs row{{-1}, true};
    Node* e = Op(g, "exp", {Op(g, "sub", {x, Op(g, "max", {x}, row)})});
    g.AddOutput(Op(g, "div", {e, Op(g, "sum", {e}, row)}));
    return g;
  };
  auto x = Pseudorandom(rows * cols, 71);
  // Rows far from 0 (up to 80): exp without the max subtracted would overflow.
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = x[i] * 4 + 16.0f * static_cast<float>(i / cols);
  const std::vector<float> want = kiln::testing::RefSoftmaxRows(x, rows, cols);
  CompileResult report;
  ExpectClose(CompileAndRun(build(), CompileOptions{}, x, &report), want, 1e-5);
  EXPECT_EQ(report.kernels.size(), 1u);
  CompileOptions o0;
  o0.opt_level = 0;
  ExpectClose(CompileAndRun(build(), o0, x, &report), want, 1e-5);
  EXPECT_EQ(report.kernels.size(), 5u);
}

// Instance norm written out over [2, 3, 5, 7]'s planes: one kernel, the
// planes its rows (row_stages.cc), against the formula computed here.
TEST_F(PipelineNumericsTest, InstanceNormWrittenOutIsOneKernelMatchingTheFormula) {
  const int64_t planes = 6, plane = 35;
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 3, 5, 7}});
  const ReduceAttrs axes{{2, 3}, true};
  Node* centered = Op(g, "sub", {x, Op(g, "mean", {x}, axes)});
  Node* var = Op(g, "mean", {Op(g, "mul", {centered, centered})}, axes);
  Node* eps = g.AddConstant("eps", FloatValues({}, {1e-5f}));
  g.AddOutput(Op(g, "div", {centered, Op(g, "sqrt", {Op(g, "add", {var, eps})})}));
  auto x_values = Pseudorandom(planes * plane, 81);
  for (int64_t i = 0; i < planes * plane; ++i) x_values[i] += static_cast<float>(i / plane);
  std::vector<float> want(x_values.size());
  for (int64_t p = 0; p < planes; ++p) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < plane; ++i) mean += x_values[p * plane + i];
    mean /= plane;
    for (int64_t i = 0; i < plane; ++i) sq += std::pow(x_values[p * plane + i] - mean, 2);
    for (int64_t i = 0; i < plane; ++i) {
      want[p * plane + i] = (x_values[p * plane + i] - mean) / std::sqrt(sq / plane + 1e-5);
    }
  }
  CompileResult report;
  ExpectClose(CompileAndRun(std::move(g), CompileOptions{}, x_values, &report), want, 1e-5);
  EXPECT_EQ(report.kernels.size(), 1u);
}

TEST_F(PipelineNumericsTest, ThreeHundredAddChainIsRightWithEitherFuseDepth) {
  Graph g;
  auto build = [] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {2, 8}});
    Node* c = g.AddConstant("c", FloatValues({2, 8}, std::vector<float>(16, 0.5f)));
    Node* v = x;
    for (int i = 0; i < 300; ++i) v = Op(g, "add", {v, c});
    g.AddOutput(v);
    return g;
  };
  auto x = Pseudorandom(16, 61);
  std::vector<float> want(16);
  for (int i = 0; i < 16; ++i) {
    float v = x[i];
    for (int k = 0; k < 300; ++k) v += 0.5f;
    want[i] = v;
  }
  CompileResult report;
  ExpectClose(CompileAndRun(build(), CompileOptions{}, x, &report), want, 1e-6);
  EXPECT_EQ(report.kernels.size(), 2u);
  CompileOptions deep;
  deep.max_fuse_depth = 1000;
  ExpectClose(CompileAndRun(build(), deep, x, &report), want, 1e-6);
  EXPECT_EQ(report.kernels.size(), 1u);
}

}  // namespace
}  // namespace kiln
