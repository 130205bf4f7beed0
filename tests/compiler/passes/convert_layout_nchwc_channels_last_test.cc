// ConvertLayoutNchwc on a ConvNeXt-shaped graph: channel LayerNorms and MLPs
// run channels-last between permutes, and the depthwise convs, the layer
// scale and the residual adds run blocked. Checks that the automatic mode
// takes it (the permutes' transforms are copies of whole vectors) and that
// the compiled model, blocked or not, matches a float64 reference.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/passes/convert_layout_nchwc.h"
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

// Batch 2, a 3 x 24 x 24 image; a 4x4 stride-4 stem to 32 channels (6 x 6),
// one block; a 2x2 stride-2 downsample to 48 channels (3 x 3), one block;
// global average pooling.
constexpr int64_t kBatch = 2, kIn = 3, kHw = 24, kC1 = 32, kC2 = 48;
constexpr float kEps = 1e-6f;

int seed = 100;
std::vector<float> Values(int64_t n, float scale = 1.0f) {
  std::vector<float> v = Pseudorandom(n, seed++);
  for (float& x : v) x *= scale;
  return v;
}

struct LayerNormWeights {
  explicit LayerNormWeights(int64_t c) : gamma(Values(c)), beta(Values(c)) {}
  std::vector<float> gamma, beta;
};

struct BlockWeights {
  explicit BlockWeights(int64_t c)
      : dw(Values(c * 49, 0.3f)),
        dw_bias(Values(c)),
        norm(c),
        w1(Values(c * 4 * c, 0.3f)),
        b1(Values(4 * c)),
        w2(Values(4 * c * c, 0.2f)),
        b2(Values(c)),
        scale(Values(c)) {}
  std::vector<float> dw, dw_bias;
  LayerNormWeights norm;
  std::vector<float> w1, b1, w2, b2, scale;  // w1 (C, 4C), w2 (4C, C): MatMul's
};

struct Weights {
  std::vector<float> stem = Values(kC1 * kIn * 16), stem_bias = Values(kC1);
  LayerNormWeights stem_norm{kC1};
  BlockWeights block1{kC1};
  LayerNormWeights down_norm{kC1};
  std::vector<float> down = Values(kC2 * kC1 * 4, 0.3f), down_bias = Values(kC2);
  BlockWeights block2{kC2};
};

// ---- the graph, as PyTorch exports torchvision's ConvNeXt ----

Node* Constant(Graph& g, std::vector<int64_t> shape, const std::vector<float>& v) {
  static int n = 0;
  return g.AddConstant("k" + std::to_string(n++), FloatValues(std::move(shape), v));
}

Node* Permute(Graph& g, Node* x, std::vector<int64_t> perm) {
  return Op(g, "transpose", {x}, TransposeAttrs{std::move(perm)});
}

// LayerNormalization over the last axis, decomposed as ONNX's function is.
Node* LayerNorm(Graph& g, Node* x, const LayerNormWeights& w) {
  const int64_t c = w.gamma.size();
  Node* mean = Op(g, "mean", {x}, ReduceAttrs{{-1}, true});
  Node* d = Op(g, "sub", {x, mean});
  Node* var = Op(g, "mean", {Op(g, "mul", {d, d})}, ReduceAttrs{{-1}, true});
  Node* sd = Op(g, "sqrt", {Op(g, "add", {var, Constant(g, {}, {kEps})})});
  return Op(
      g, "add",
      {Op(g, "mul", {Op(g, "div", {d, sd}), Constant(g, {c}, w.gamma)}), Constant(g, {c}, w.beta)});
}

// NCHW LayerNorm over the channels (ConvNeXt's LayerNorm2d): permuted.
Node* LayerNorm2d(Graph& g, Node* x, const LayerNormWeights& w) {
  return Permute(g, LayerNorm(g, Permute(g, x, {0, 2, 3, 1}), w), {0, 3, 1, 2});
}

Node* Block(Graph& g, Node* x, const BlockWeights& w) {
  const int64_t c = w.b2.size();
  Conv2DAttrs dw;
  dw.padding = {3, 3, 3, 3};
  dw.groups = c;
  Node* d = Op(g, "conv2d", {x, Constant(g, {c, 1, 7, 7}, w.dw), Constant(g, {c}, w.dw_bias)}, dw);
  Node* n = LayerNorm(g, Permute(g, d, {0, 2, 3, 1}), w.norm);
  Node* h = Op(g, "add",
               {Op(g, "matmul", {n, Constant(g, {c, 4 * c}, w.w1)}), Constant(g, {4 * c}, w.b1)});
  Node* erf = Op(g, "erf", {Op(g, "div", {h, Constant(g, {}, {std::sqrt(2.0f)})})});
  Node* gelu = Op(
      g, "mul",
      {Op(g, "mul", {h, Op(g, "add", {erf, Constant(g, {}, {1.0f})})}), Constant(g, {}, {0.5f})});
  Node* y = Op(g, "add",
               {Op(g, "matmul", {gelu, Constant(g, {4 * c, c}, w.w2)}), Constant(g, {c}, w.b2)});
  Node* scaled = Op(g, "mul", {Permute(g, y, {0, 3, 1, 2}), Constant(g, {c, 1, 1}, w.scale)});
  return Op(g, "add", {scaled, x});
}

Graph TinyConvNext(const Weights& w) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {kBatch, kIn, kHw, kHw}});
  Conv2DAttrs stem;
  stem.strides = {4, 4};
  Node* s = Op(g, "conv2d",
               {x, Constant(g, {kC1, kIn, 4, 4}, w.stem), Constant(g, {kC1}, w.stem_bias)}, stem);
  Node* b1 = Block(g, LayerNorm2d(g, s, w.stem_norm), w.block1);
  Conv2DAttrs down;
  down.strides = {2, 2};
  Node* d = Op(g, "conv2d",
               {LayerNorm2d(g, b1, w.down_norm), Constant(g, {kC2, kC1, 2, 2}, w.down),
                Constant(g, {kC2}, w.down_bias)},
               down);
  g.AddOutput(Op(g, "mean", {Block(g, d, w.block2)}, ReduceAttrs{{2, 3}, true}));
  return g;
}

// ---- the float64 reference, NCHW throughout ----

using Planes = std::vector<double>;  // (N, C, H, W)

Planes Conv(const Planes& x, int64_t c, int64_t hw, const std::vector<float>& w,
            const std::vector<float>& b, int64_t o, int64_t k, int64_t stride, int64_t pad,
            bool depthwise) {
  const int64_t ohw = (hw + 2 * pad - k) / stride + 1;
  Planes y(kBatch * o * ohw * ohw);
  for (int64_t n = 0; n < kBatch; ++n)
    for (int64_t oi = 0; oi < o; ++oi)
      for (int64_t oy = 0; oy < ohw; ++oy)
        for (int64_t ox = 0; ox < ohw; ++ox) {
          double acc = b[oi];
          for (int64_t ci = depthwise ? oi : 0; ci < (depthwise ? oi + 1 : c); ++ci)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
                if (iy < 0 || iy >= hw || ix < 0 || ix >= hw) continue;
                const int64_t wi =
                    depthwise ? (oi * k + ky) * k + kx : ((oi * c + ci) * k + ky) * k + kx;
                acc += x[((n * c + ci) * hw + iy) * hw + ix] * w[wi];
              }
          y[((n * o + oi) * ohw + oy) * ohw + ox] = acc;
        }
  return y;
}

// LayerNorm over the channels at every pixel.
Planes ChannelNorm(const Planes& x, int64_t c, int64_t hw, const LayerNormWeights& w) {
  Planes y(x.size());
  for (int64_t n = 0; n < kBatch; ++n)
    for (int64_t p = 0; p < hw * hw; ++p) {
      auto at = [&](int64_t ci) { return (n * c + ci) * hw * hw + p; };
      double mean = 0, var = 0;
      for (int64_t ci = 0; ci < c; ++ci) mean += x[at(ci)] / c;
      for (int64_t ci = 0; ci < c; ++ci) var += (x[at(ci)] - mean) * (x[at(ci)] - mean) / c;
      for (int64_t ci = 0; ci < c; ++ci) {
        y[at(ci)] = (x[at(ci)] - mean) / std::sqrt(var + kEps) * w.gamma[ci] + w.beta[ci];
      }
    }
  return y;
}

Planes RefBlock(const Planes& x, int64_t c, int64_t hw, const BlockWeights& w) {
  Planes n = ChannelNorm(Conv(x, c, hw, w.dw, w.dw_bias, c, 7, 1, 3, true), c, hw, w.norm);
  Planes y = x;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t p = 0; p < hw * hw; ++p) {
      auto at = [&](int64_t ci) { return (b * c + ci) * hw * hw + p; };
      std::vector<double> h(4 * c);
      for (int64_t j = 0; j < 4 * c; ++j) {
        double acc = w.b1[j];
        for (int64_t ci = 0; ci < c; ++ci) acc += n[at(ci)] * w.w1[ci * 4 * c + j];
        h[j] = acc * 0.5 * (1 + std::erf(acc / std::sqrt(2.0)));
      }
      for (int64_t ci = 0; ci < c; ++ci) {
        double acc = w.b2[ci];
        for (int64_t j = 0; j < 4 * c; ++j) acc += h[j] * w.w2[j * c + ci];
        y[at(ci)] += acc * w.scale[ci];
      }
    }
  return y;
}

// (N, C2) pooled features.
std::vector<double> Reference(const Weights& w, const std::vector<float>& image) {
  Planes x(image.begin(), image.end());
  const int64_t hw1 = kHw / 4, hw2 = hw1 / 2;
  Planes s = ChannelNorm(Conv(x, kIn, kHw, w.stem, w.stem_bias, kC1, 4, 4, 0, false), kC1, hw1,
                         w.stem_norm);
  Planes b1 = RefBlock(s, kC1, hw1, w.block1);
  Planes d = Conv(ChannelNorm(b1, kC1, hw1, w.down_norm), kC1, hw1, w.down, w.down_bias, kC2, 2, 2,
                  0, false);
  Planes b2 = RefBlock(d, kC2, hw2, w.block2);
  std::vector<double> pooled(kBatch * kC2, 0.0);
  for (int64_t i = 0; i < kBatch * kC2; ++i) {
    for (int64_t p = 0; p < hw2 * hw2; ++p) pooled[i] += b2[i * hw2 * hw2 + p] / (hw2 * hw2);
  }
  return pooled;
}

int CountOps(const Graph& g, const std::string& op, int rank) {
  int n = 0;
  for (const Node* node : g.TopologicalOrder()) {
    n += node->is_op() && node->op_name() == op && node->type.rank() == rank;
  }
  return n;
}

TEST(ConvertLayoutNchwcChannelsLastTest, AutoKeepsConvNextBlocksBlocked) {
  Weights w;
  Graph g = TinyConvNext(w);
  PassContext ctx;
  ctx.config.nchwc_layout = NchwcLayout::kAuto;
  ASSERT_TRUE(CreateInferTypePass()->Run(g, ctx).ok());
  auto changed = CreateConvertLayoutNchwcPass()->Run(g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed);
  EXPECT_EQ(CountOps(g, "conv2d_nchwc", 5), 2);
  EXPECT_EQ(CountOps(g, "conv2d_nchwc_depthwise", 5), 2);
  EXPECT_EQ(CountOps(g, "conv2d", 4), 0);
  // Both blocks' layer scale and residual add, blocked; none left in NCHW.
  EXPECT_EQ(CountOps(g, "mul", 5), 2);
  EXPECT_EQ(CountOps(g, "add", 5), 2);
  // The image in (rank 5) and the pooled features out (rank 4), and one
  // transform each way around every channels-last stretch (two
  // LayerNorm2d's, two blocks).
  EXPECT_EQ(CountOps(g, "layout_transform", 5), 1 + 4);
  EXPECT_EQ(CountOps(g, "layout_transform", 4), 1 + 4);
}

TEST(ConvertLayoutNchwcChannelsLastTest, CompiledModelMatchesReference) {
  auto m = ModelManager::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  Weights w;
  const std::vector<float> image = Values(kBatch * kIn * kHw * kHw);
  const std::vector<double> want = Reference(w, image);
  for (NchwcLayout layout : {NchwcLayout::kAuto, NchwcLayout::kOff}) {
    SCOPED_TRACE(layout == NchwcLayout::kAuto ? "auto" : "off");
    CompileOptions options;
    options.nchwc_layout = layout;
    const std::string name = layout == NchwcLayout::kAuto ? "auto" : "off";
    auto r = (*m)->Compile(name, TinyConvNext(w), options);
    ASSERT_TRUE(r.ok()) << r.status();
    int depthwise = 0;
    for (const auto& k : r->kernels) {
      depthwise += std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_depthwise");
    }
    EXPECT_EQ(depthwise, layout == NchwcLayout::kAuto ? 2 : 0);
    auto input = Tensor::FromBytes(
        {DType::kFloat32, {kBatch, kIn, kHw, kHw}},
        absl::string_view(reinterpret_cast<const char*>(image.data()), image.size() * 4));
    ASSERT_TRUE(input.ok());
    auto result = (*m)->Find(name)->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const Tensor& out = result->outputs[0];
    ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
    const float* got = static_cast<const float*>(out.data());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i]))) << "at " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
