// Contractions with a fused elementwise prologue (fuse_prologue.cc), compiled
// and run against reference loops (double accumulation) that apply the
// prologue first: a padded conv (NCHW and blocked) whose BN + ReLU prologue
// must not reach the padding, an SE block's per-(n, c) scale into a 1x1
// conv, dense and matmul with a per-feature prologue, and a blocked conv's
// scaled input.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln {
namespace {

using engine::ModelManager;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;

constexpr int64_t kBlock = 16;

class PrologueNumericsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Compiles `g`, checks that one kernel holds `op` and every op in
  // `prologue` under the contraction schedule, runs it on `inputs` and
  // returns the first output.
  std::vector<float> CompileAndRun(
      Graph g, const std::string& op, const std::vector<std::string>& prologue,
      const std::vector<std::pair<TensorType, std::vector<float>>>& inputs,
      CompileOptions options = {}) {
    // The direct convs' prologues; winograd_conv_test has Winograd's.
    options.disabled_passes.push_back("WinogradConv");
    auto r = manager_->Compile("m", std::move(g), options);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    bool fused = false;
    for (const auto& k : r->kernels) {
      if (std::find(k.ops.begin(), k.ops.end(), op) == k.ops.end()) continue;
      fused = k.schedule.find("gemm") != std::string::npos;
      for (const std::string& p : prologue) {
        fused &= std::find(k.ops.begin(), k.ops.end(), p) != k.ops.end();
      }
      SCOPED_TRACE(k.schedule);
    }
    EXPECT_TRUE(fused) << "the prologue should run in the tiled " << op << " kernel";
    std::vector<Tensor> tensors;
    for (const auto& [type, values] : inputs) {
      auto t = Tensor::FromBytes(
          type, absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
      EXPECT_TRUE(t.ok());
      if (!t.ok()) return {};
      tensors.push_back(*std::move(t));
    }
    std::vector<const Tensor*> args;
    for (const Tensor& t : tensors) args.push_back(&t);
    auto result = manager_->Find("m")->Run(args);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    const Tensor& out = result->outputs[0];
    const float* got = static_cast<const float*>(out.data());
    return std::vector<float>(got, got + out.type().NumElements());
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
    }
  }

  std::unique_ptr<ModelManager> manager_;
};

// relu(x * scale[c] + shift[c]) into a 3x3 conv with padding 1, stride
// `stride`. The shifts are positive, so f(0) > 0: a kernel that applied the
// prologue to the padding would be off along every border.
// Blocked (ConvertLayoutNchwc on), the prologue reads its input through the
// layout_transform into NCHW16c, in the blocked conv's padded copy.
TEST_F(PrologueNumericsTest, PaddedConvBatchNormReluKeepsPaddingZero) {
  for (auto [stride, blocked] : {std::pair{1, false}, {2, false}, {1, true}}) {
    SCOPED_TRACE(stride);
    SCOPED_TRACE(blocked);
    const int64_t n = 2, c = 24, h = 15, w = 17, o = 32, k = 3;
    auto x = Pseudorandom(n * c * h * w, 1);
    auto wt = Pseudorandom(o * c * k * k, 2);
    auto scale = Pseudorandom(c, 3);
    std::vector<float> shift(c);
    for (int64_t i = 0; i < c; ++i) shift[i] = 0.5f + 0.05f * static_cast<float>(i);

    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, w}});
    Node* s = g.AddConstant("scale", FloatValues({1, c, 1, 1}, scale));
    Node* b = g.AddConstant("shift", FloatValues({1, c, 1, 1}, shift));
    Node* act = Op(g, "relu", {Op(g, "add", {Op(g, "mul", {in, s}), b})});
    Conv2DAttrs a;
    a.strides = {stride, stride};
    a.padding = {1, 1, 1, 1};
    Node* conv = Op(g, "conv2d", {act, g.AddConstant("w", FloatValues({o, c, k, k}, wt))}, a);
    g.AddOutput(conv);
    // The residual the pre-activation reads is an output too, as in a
    // pre-activation ResNet, so the BN cannot be anybody's epilogue.
    g.AddOutput(Op(g, "add", {in, in}));

    std::vector<float> pre(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t ch = static_cast<int64_t>(i) / (h * w) % c;
      pre[i] = std::max(x[i] * scale[ch] + shift[ch], 0.0f);
    }
    CompileOptions options;
    options.nchwc_layout = blocked ? NchwcLayout::kOn : NchwcLayout::kOff;
    std::vector<float> got =
        CompileAndRun(std::move(g), blocked ? "conv2d_nchwc" : "conv2d",
                      blocked ? std::vector<std::string>{"mul", "add", "relu", "layout_transform"}
                              : std::vector<std::string>{"mul", "add", "relu"},
                      {{{DType::kFloat32, {n, c, h, w}}, x}}, options);
    ExpectNear(got, kiln::testing::RefConv2DStrided(pre, wt, {}, n, c, h, w, o, k, k, stride, 1));
  }
}

// An SE block's channel scale: x * s[n, c] (s an input of its own, one value
// per image and channel) into a 1x1 conv, at batch 2.
TEST_F(PrologueNumericsTest, PerImageChannelScaleIntoPointwiseConv) {
  const int64_t n = 2, c = 40, h = 14, w = 14, o = 48;
  auto x = Pseudorandom(n * c * h * w, 4);
  auto s = Pseudorandom(n * c, 5);
  auto wt = Pseudorandom(o * c, 6);
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, w}});
  Node* sc = g.AddInput("s", {DType::kFloat32, {n, c, 1, 1}});
  Node* conv =
      Op(g, "conv2d", {Op(g, "mul", {in, sc}), g.AddConstant("w", FloatValues({o, c, 1, 1}, wt))},
         Conv2DAttrs{});
  g.AddOutput(conv);
  std::vector<float> pre(x.size());
  for (size_t i = 0; i < x.size(); ++i) pre[i] = x[i] * s[i / (h * w)];
  std::vector<float> got =
      CompileAndRun(std::move(g), "conv2d", {"mul"},
                    {{{DType::kFloat32, {n, c, h, w}}, x}, {{DType::kFloat32, {n, c, 1, 1}}, s}});
  ExpectNear(got, kiln::testing::RefConv2D(pre, wt, {}, n, c, h, w, o, 1, 1));
}

// dense(relu(x * scale[k] + shift[k]), w), and matmul of the same with w
// transposed: the prologue is applied where the activation operand is
// packed.
TEST_F(PrologueNumericsTest, DenseAndMatMulWithPerFeaturePrologue) {
  const int64_t m = 24, k = 96, nn = 80;
  auto x = Pseudorandom(m * k, 7);
  auto scale = Pseudorandom(k, 8);
  auto shift = Pseudorandom(k, 9);
  auto wt = Pseudorandom(nn * k, 10);  // [nn, k]
  std::vector<float> wt_t(k * nn);     // [k, nn]
  for (int64_t j = 0; j < nn; ++j)
    for (int64_t q = 0; q < k; ++q) wt_t[q * nn + j] = wt[j * k + q];
  std::vector<float> pre(x.size());
  for (size_t i = 0; i < x.size(); ++i) pre[i] = std::max(x[i] * scale[i % k] + shift[i % k], 0.0f);
  for (const std::string op : {"dense", "matmul"}) {
    SCOPED_TRACE(op);
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    Node* act = Op(g, "relu",
                   {Op(g, "add",
                       {Op(g, "mul", {in, g.AddConstant("s", FloatValues({k}, scale))}),
                        g.AddConstant("t", FloatValues({k}, shift))})});
    Node* w = op == "dense" ? g.AddConstant("w", FloatValues({nn, k}, wt))
                            : g.AddConstant("w", FloatValues({k, nn}, wt_t));
    g.AddOutput(Op(g, op, {act, w}));
    g.AddOutput(Op(g, "neg", {in}));  // x is read elsewhere too
    std::vector<float> got =
        CompileAndRun(std::move(g), op, {"mul", "add", "relu"}, {{{DType::kFloat32, {m, k}}, x}});
    ExpectNear(got, kiln::testing::RefDense(pre, wt, {}, m, k, nn));
  }
}

// OIHW -> O/16, C/16, KH, KW, 16 (in), 16 (out), from the layout's definition.
std::vector<float> BlockWeight(const std::vector<float>& w, int64_t o, int64_t c, int64_t k) {
  std::vector<float> out(o * c * k * k);
  for (int64_t oi = 0; oi < o; ++oi)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t y = 0; y < k; ++y)
        for (int64_t x = 0; x < k; ++x) {
          const int64_t dst =
              ((((oi / kBlock * (c / kBlock) + ci / kBlock) * k + y) * k + x) * kBlock +
               ci % kBlock) *
                  kBlock +
              oi % kBlock;
          out[dst] = w[((oi * c + ci) * k + y) * k + x];
        }
  return out;
}

// A blocked (NCHW16c) input scaled per (n, c) into a conv2d_nchwc, with
// padding and without: the prologue runs in the copy into the padded
// blocked buffer.
TEST_F(PrologueNumericsTest, BlockedConvWithChannelScale) {
  for (int64_t k : {1, 3}) {
    SCOPED_TRACE(k);
    const int64_t n = 1, c = 32, h = 9, w = 11, o = 32, pad = k / 2;
    const int64_t cb = c / kBlock, ob = o / kBlock;
    auto x = Pseudorandom(n * c * h * w, 11);  // NCHW
    auto s = Pseudorandom(n * c, 12);
    auto wt = Pseudorandom(o * c * k * k, 13);
    std::vector<float> xb(x.size());
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t p = 0; p < h * w; ++p)
        xb[(ci / kBlock * h * w + p) * kBlock + ci % kBlock] = x[ci * h * w + p];
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, cb, h, w, kBlock}});
    Node* sc = g.AddInput("s", {DType::kFloat32, {n, cb, 1, 1, kBlock}});
    Conv2DAttrs a;
    a.padding = {pad, pad, pad, pad};
    Node* weight =
        g.AddConstant("w", FloatValues({ob, cb, k, k, kBlock, kBlock}, BlockWeight(wt, o, c, k)));
    Node* conv = Op(g, "conv2d_nchwc", {Op(g, "mul", {in, sc}), weight}, a);
    g.AddOutput(Op(g, "layout_transform", {conv}, LayoutTransformAttrs{kBlock, 0, o}));
    std::vector<float> pre(x.size());
    for (size_t i = 0; i < x.size(); ++i) pre[i] = x[i] * s[i / (h * w)];
    std::vector<float> got = CompileAndRun(std::move(g), "conv2d_nchwc", {"mul"},
                                           {{{DType::kFloat32, {n, cb, h, w, kBlock}}, xb},
                                            {{DType::kFloat32, {n, cb, 1, 1, kBlock}}, s}});
    ExpectNear(got, kiln::testing::RefConv2DStrided(pre, wt, {}, n, c, h, w, o, k, k, 1, pad));
  }
}

}  // namespace
}  // namespace kiln
