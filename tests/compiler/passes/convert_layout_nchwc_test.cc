// ConvertLayoutNchwc on a small CNN (conv - batch-norm scale/shift - relu -
// max pool - conv - residual add): which ops it leaves blocked and where it
// puts the transforms, and the compiled model against a reference computed
// here with plain loops.
#include "compiler/passes/convert_layout_nchwc.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "compiler/passes/infer_type.h"
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

// 3 -> 20 channels (not a multiple of 16: the blocks carry padding), 16x16.
constexpr int64_t kIn = 3, kCh = 20, kHw = 16, kPooled = 8;

struct Weights {
  std::vector<float> w1 = Pseudorandom(kCh * kIn * 9, 11), b1 = Pseudorandom(kCh, 12);
  std::vector<float> scale = Pseudorandom(kCh, 13), shift = Pseudorandom(kCh, 14);
  std::vector<float> w2 = Pseudorandom(kCh * kCh * 9, 15);
};

Graph SmallCnn(const Weights& w) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, kIn, kHw, kHw}});
  Conv2DAttrs same;
  same.padding = {1, 1, 1, 1};
  Node* c1 = Op(g, "conv2d",
                {x, g.AddConstant("w1", FloatValues({kCh, kIn, 3, 3}, w.w1)),
                 g.AddConstant("b1", FloatValues({kCh}, w.b1))},
                same);
  Node* bn = Op(g, "add",
                {Op(g, "mul", {c1, g.AddConstant("s", FloatValues({kCh, 1, 1}, w.scale))}),
                 g.AddConstant("t", FloatValues({kCh, 1, 1}, w.shift))});
  Node* r = Op(g, "relu", {bn});
  Pool2DAttrs pool;
  pool.kernel = {2, 2};
  pool.strides = {2, 2};
  Node* p = Op(g, "max_pool2d", {r}, pool);
  Node* c2 = Op(g, "conv2d", {p, g.AddConstant("w2", FloatValues({kCh, kCh, 3, 3}, w.w2))}, same);
  g.AddOutput(Op(g, "add", {c2, p}));
  return g;
}

std::vector<float> Reference(const Weights& w, const std::vector<float>& x) {
  std::vector<float> c1 =
      kiln::testing::RefConv2DStrided(x, w.w1, w.b1, 1, kIn, kHw, kHw, kCh, 3, 3, 1, 1);
  for (int64_t c = 0; c < kCh; ++c) {
    for (int64_t i = 0; i < kHw * kHw; ++i) {
      float& v = c1[c * kHw * kHw + i];
      v = std::max(v * w.scale[c] + w.shift[c], 0.0f);
    }
  }
  std::vector<float> p(kCh * kPooled * kPooled);
  for (int64_t c = 0; c < kCh; ++c)
    for (int64_t y = 0; y < kPooled; ++y)
      for (int64_t xx = 0; xx < kPooled; ++xx) {
        float m = -INFINITY;
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx)
            m = std::max(m, c1[(c * kHw + 2 * y + dy) * kHw + 2 * xx + dx]);
        p[(c * kPooled + y) * kPooled + xx] = m;
      }
  std::vector<float> out =
      kiln::testing::RefConv2DStrided(p, w.w2, {}, 1, kCh, kPooled, kPooled, kCh, 3, 3, 1, 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] += p[i];
  return out;
}

TEST(ConvertLayoutNchwcTest, KeepsTheChainBlockedWithTransformsAtTheEnds) {
  Weights w;
  Graph g = SmallCnn(w);
  PassContext ctx;
  ASSERT_TRUE(CreateInferTypePass()->Run(g, ctx).ok());
  // The default (kAuto) leaves two convs alone: too few to pay for the transforms.
  auto unchanged = CreateConvertLayoutNchwcPass()->Run(g, ctx);
  ASSERT_TRUE(unchanged.ok()) << unchanged.status();
  EXPECT_FALSE(*unchanged);

  ctx.config.nchwc_layout = NchwcLayout::kOn;
  auto changed = CreateConvertLayoutNchwcPass()->Run(g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  std::map<std::string, int> count;
  for (Node* n : g.TopologicalOrder()) {
    if (!n->is_op()) continue;
    ++count[n->op_name()];
    if (n->op_name() != "layout_transform") {
      EXPECT_EQ(n->type.rank(), 5) << n->op_name() << " left in NCHW";
    }
  }
  EXPECT_EQ(count["conv2d"], 0);
  EXPECT_EQ(count["conv2d_nchwc"], 2);
  EXPECT_EQ(count["layout_transform"], 2);  // the input in, the output back
  EXPECT_EQ(count["max_pool2d"], 1);
  EXPECT_EQ(count["mul"], 1);
  EXPECT_EQ(count["add"], 2);
  // The stem's 3 channels are one block of 3 (NHWC), not padded to 16.
  for (Node* n : g.TopologicalOrder()) {
    if (n->is_op() && n->op_name() == "layout_transform" && n->inputs[0]->is_input()) {
      EXPECT_EQ(n->type.shape, (std::vector<int64_t>{1, 1, kHw, kHw, kIn}));
    }
  }
  EXPECT_EQ(g.outputs()[0]->type.shape, (std::vector<int64_t>{1, kCh, kPooled, kPooled}));
}

// Four 3x3 convs over 8 channels, each with a relu; the third depthwise, or
// the second and third followed by an op the pass leaves NCHW (abs).
enum class Chain { kPlain, kDepthwise, kCut };

Graph ConvChain(Chain kind) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 8, 10, 10}});
  for (int i = 0; i < 4; ++i) {
    Conv2DAttrs a;
    a.padding = {1, 1, 1, 1};
    a.groups = kind == Chain::kDepthwise && i == 2 ? 8 : 1;
    const std::vector<float> w = Pseudorandom(8 * (8 / a.groups) * 9, 20 + i);
    x = Op(g, "relu",
           {Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({8, 8 / a.groups, 3, 3}, w))}, a)});
    if (kind == Chain::kCut && (i == 1 || i == 2)) x = Op(g, "abs", {x});
  }
  g.AddOutput(x);
  return g;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.TopologicalOrder()) n += node->is_op() && node->op_name() == op;
  return n;
}

TEST(ConvertLayoutNchwcTest, AutoConvertsRegionsWithFewTransforms) {
  PassContext ctx;
  ctx.config.nchwc_layout = NchwcLayout::kAuto;
  Graph plain = ConvChain(Chain::kPlain);
  ASSERT_TRUE(CreateInferTypePass()->Run(plain, ctx).ok());
  auto changed = CreateConvertLayoutNchwcPass()->Run(plain, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountOps(plain, "conv2d_nchwc"), 4);
  EXPECT_EQ(CountOps(plain, "layout_transform"), 2);

  // A depthwise conv stays in the region: transforms only at the ends.
  Graph mixed = ConvChain(Chain::kDepthwise);
  ASSERT_TRUE(CreateInferTypePass()->Run(mixed, ctx).ok());
  auto blocked = CreateConvertLayoutNchwcPass()->Run(mixed, ctx);
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  EXPECT_TRUE(*blocked);
  EXPECT_EQ(CountOps(mixed, "conv2d_nchwc"), 3);
  EXPECT_EQ(CountOps(mixed, "conv2d_nchwc_depthwise"), 1);
  EXPECT_EQ(CountOps(mixed, "conv2d"), 0);
  EXPECT_EQ(CountOps(mixed, "layout_transform"), 2);

  // Cut in three pieces, the region would need six transforms: left alone,
  // unchanged, unless forced on.
  Graph cut = ConvChain(Chain::kCut);
  ASSERT_TRUE(CreateInferTypePass()->Run(cut, ctx).ok());
  const int64_t nodes = cut.num_nodes();
  auto unchanged = CreateConvertLayoutNchwcPass()->Run(cut, ctx);
  ASSERT_TRUE(unchanged.ok()) << unchanged.status();
  EXPECT_FALSE(*unchanged);
  EXPECT_EQ(cut.num_nodes(), nodes);
  EXPECT_EQ(CountOps(cut, "conv2d"), 4);
  ctx.config.nchwc_layout = NchwcLayout::kOn;
  auto forced = CreateConvertLayoutNchwcPass()->Run(cut, ctx);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_TRUE(*forced);
  EXPECT_EQ(CountOps(cut, "conv2d_nchwc"), 4);
  EXPECT_EQ(CountOps(cut, "layout_transform"), 6);
}

// A MobileNetV3-like block on 20 channels (not a multiple of 16): a strided
// stem conv and hardswish as ONNX exports it (x * hard_sigmoid(x)), a 5x5
// depthwise conv and the hard_swish op, a squeeze-excitation block (mean
// over H and W, 1x1 convs, relu, hard_sigmoid, the channel scale), a 1x1
// conv with a residual add, and global average pooling (sum, then scale).
constexpr int64_t kSeIn = 3, kSeCh = 20, kSeSqueeze = 8, kSeHw = 13, kSeOut = 7;

struct SeWeights {
  std::vector<float> w1 = Pseudorandom(kSeCh * kSeIn * 9, 31), b1 = Pseudorandom(kSeCh, 32);
  std::vector<float> wd = Pseudorandom(kSeCh * 25, 33), bd = Pseudorandom(kSeCh, 34);
  std::vector<float> ws1 = Pseudorandom(kSeSqueeze * kSeCh, 35);
  std::vector<float> bs1 = Pseudorandom(kSeSqueeze, 36);
  std::vector<float> ws2 = Pseudorandom(kSeCh * kSeSqueeze, 37), bs2 = Pseudorandom(kSeCh, 38);
  std::vector<float> wp = Pseudorandom(kSeCh * kSeCh, 39);
};

Graph SeBlock(const SeWeights& w) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, kSeIn, kSeHw, kSeHw}});
  Conv2DAttrs stem;
  stem.padding = {1, 1, 1, 1};
  stem.strides = {2, 2};
  Node* c1 = Op(g, "conv2d",
                {x, g.AddConstant("w1", FloatValues({kSeCh, kSeIn, 3, 3}, w.w1)),
                 g.AddConstant("b1", FloatValues({kSeCh}, w.b1))},
                stem);
  ActivationAttrs hs{1.0f / 6, 0.5f};
  Node* h1 = Op(g, "mul", {c1, Op(g, "hard_sigmoid", {c1}, hs)});
  Conv2DAttrs dw;
  dw.padding = {2, 2, 2, 2};
  dw.groups = kSeCh;
  Node* d = Op(g, "conv2d",
               {h1, g.AddConstant("wd", FloatValues({kSeCh, 1, 5, 5}, w.wd)),
                g.AddConstant("bd", FloatValues({kSeCh}, w.bd))},
               dw);
  Node* h2 = Op(g, "hard_swish", {d});
  Node* m = Op(g, "mean", {h2}, ReduceAttrs{{2, 3}, true});
  Node* ws1 = g.AddConstant("ws1", FloatValues({kSeSqueeze, kSeCh, 1, 1}, w.ws1));
  Node* bs1 = g.AddConstant("bs1", FloatValues({kSeSqueeze}, w.bs1));
  Node* s1 = Op(g, "relu", {Op(g, "conv2d", {m, ws1, bs1}, Conv2DAttrs{})});
  Node* s2 = Op(g, "hard_sigmoid",
                {Op(g, "conv2d",
                    {s1, g.AddConstant("ws2", FloatValues({kSeCh, kSeSqueeze, 1, 1}, w.ws2)),
                     g.AddConstant("bs2", FloatValues({kSeCh}, w.bs2))},
                    Conv2DAttrs{})},
                hs);
  Node* se = Op(g, "mul", {h2, s2});
  Node* p = Op(g, "conv2d", {se, g.AddConstant("wp", FloatValues({kSeCh, kSeCh, 1, 1}, w.wp))},
               Conv2DAttrs{});
  Node* out = Op(g, "add", {p, h1});
  Node* pooled = Op(g, "mul", {Op(g, "sum", {out}, ReduceAttrs{{-2, -1}, true}),
                               g.AddConstant("scale", FloatValues({}, {1.0f / 49}))});
  g.AddOutput(out);
  g.AddOutput(pooled);
  return g;
}

float HardSigmoid(float v) { return std::min(std::max(v / 6 + 0.5f, 0.0f), 1.0f); }

// Both outputs: the block's (1, C, 7, 7) and its pooled (1, C, 1, 1).
std::pair<std::vector<float>, std::vector<float>> SeReference(const SeWeights& w,
                                                              const std::vector<float>& x) {
  constexpr int64_t hw = kSeOut * kSeOut;
  std::vector<float> h1 = kiln::testing::RefConv2DStrided(x, w.w1, w.b1, 1, kSeIn, kSeHw, kSeHw,
                                                          kSeCh, 3, 3, 2, 1);
  for (float& v : h1) v *= HardSigmoid(v);
  std::vector<float> h2;
  for (int64_t c = 0; c < kSeCh; ++c) {
    std::vector<float> plane(h1.begin() + c * hw, h1.begin() + (c + 1) * hw);
    std::vector<float> k(w.wd.begin() + c * 25, w.wd.begin() + (c + 1) * 25);
    for (float v : kiln::testing::RefConv2DStrided(plane, k, {w.bd[c]}, 1, 1, kSeOut, kSeOut, 1,
                                                   5, 5, 1, 2)) {
      h2.push_back(v * HardSigmoid(v));
    }
  }
  std::vector<float> m(kSeCh, 0.0f);
  for (int64_t c = 0; c < kSeCh; ++c) {
    double sum = 0;
    for (int64_t i = 0; i < hw; ++i) sum += h2[c * hw + i];
    m[c] = static_cast<float>(sum / hw);
  }
  std::vector<float> s1 = kiln::testing::RefConv2DStrided(m, w.ws1, w.bs1, 1, kSeCh, 1, 1,
                                                          kSeSqueeze, 1, 1, 1, 0);
  for (float& v : s1) v = std::max(v, 0.0f);
  std::vector<float> s2 = kiln::testing::RefConv2DStrided(s1, w.ws2, w.bs2, 1, kSeSqueeze, 1, 1,
                                                          kSeCh, 1, 1, 1, 0);
  for (int64_t c = 0; c < kSeCh; ++c) {
    for (int64_t i = 0; i < hw; ++i) h2[c * hw + i] *= HardSigmoid(s2[c]);
  }
  std::vector<float> out = kiln::testing::RefConv2DStrided(h2, w.wp, {}, 1, kSeCh, kSeOut, kSeOut,
                                                           kSeCh, 1, 1, 1, 0);
  std::vector<float> pooled(kSeCh, 0.0f);
  for (int64_t c = 0; c < kSeCh; ++c) {
    double sum = 0;
    for (int64_t i = 0; i < hw; ++i) sum += out[c * hw + i] += h1[c * hw + i];
    pooled[c] = static_cast<float>(sum / hw);
  }
  return {out, pooled};
}

TEST(ConvertLayoutNchwcTest, KeepsDepthwiseAndSqueezeExcitationBlocked) {
  SeWeights w;
  Graph g = SeBlock(w);
  PassContext ctx;
  ctx.config.nchwc_layout = NchwcLayout::kOn;
  ASSERT_TRUE(CreateInferTypePass()->Run(g, ctx).ok());
  auto changed = CreateConvertLayoutNchwcPass()->Run(g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  for (Node* n : g.TopologicalOrder()) {
    if (n->is_op() && n->op_name() != "layout_transform") {
      EXPECT_EQ(n->type.rank(), 5) << n->op_name() << " left in NCHW";
    }
  }
  EXPECT_EQ(CountOps(g, "conv2d_nchwc"), 4);
  EXPECT_EQ(CountOps(g, "conv2d_nchwc_depthwise"), 1);
  EXPECT_EQ(CountOps(g, "layout_transform"), 3);  // the input in, both outputs back
}

TEST(ConvertLayoutNchwcTest, SqueezeExcitationBlockMatchesReference) {
  auto m = ModelManager::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  SeWeights w;
  auto x = Pseudorandom(kSeIn * kSeHw * kSeHw, 40);
  CompileOptions options;
  options.nchwc_layout = NchwcLayout::kOn;
  auto r = (*m)->Compile("se", SeBlock(w), options);
  ASSERT_TRUE(r.ok()) << r.status();
  auto input =
      Tensor::FromBytes({DType::kFloat32, {1, kSeIn, kSeHw, kSeHw}},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = (*m)->Find("se")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const auto [out, pooled] = SeReference(w, x);
  for (int i = 0; i < 2; ++i) {
    const std::vector<float>& want = i == 0 ? out : pooled;
    const Tensor& got_tensor = result->outputs[i];
    ASSERT_EQ(got_tensor.type().NumElements(), static_cast<int64_t>(want.size()));
    const float* got = static_cast<const float*>(got_tensor.data());
    for (size_t j = 0; j < want.size(); ++j) {
      ASSERT_NEAR(got[j], want[j], 1e-4 * std::max(1.0f, std::fabs(want[j])))
          << "output " << i << " at " << j;
    }
  }
}

class ConvertLayoutNchwcModelTest : public ::testing::TestWithParam<bool> {};

// With and without FoldScaleAxis: folded, the scale and shift are the conv's
// weights and bias; unfolded, they stay per-channel constants, re-laid.
TEST_P(ConvertLayoutNchwcModelTest, CompiledModelMatchesReference) {
  auto m = ModelManager::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  Weights w;
  auto x = Pseudorandom(kIn * kHw * kHw, 16);
  CompileOptions options;
  options.nchwc_layout = NchwcLayout::kOn;
  if (!GetParam()) options.disabled_passes = {"FoldScaleAxis"};
  auto r = (*m)->Compile("cnn", SmallCnn(w), options);
  ASSERT_TRUE(r.ok()) << r.status();
  int blocked_convs = 0;
  for (const auto& k : r->kernels) {
    // Direct, or by Winograd (WinogradConv takes the 3x3 ones).
    blocked_convs += std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc") +
                     std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_winograd_f2") +
                     std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_winograd_f4");
  }
  EXPECT_EQ(blocked_convs, 2);
  auto input =
      Tensor::FromBytes({DType::kFloat32, {1, kIn, kHw, kHw}},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = (*m)->Find("cnn")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<float> want = Reference(w, x);
  const Tensor& out = result->outputs[0];
  ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
  const float* got = static_cast<const float*>(out.data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(FoldScaleAxis, ConvertLayoutNchwcModelTest, ::testing::Bool());

}  // namespace
}  // namespace kiln
