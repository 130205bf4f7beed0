// conv2d_nchwc and conv2d_nchwc_depthwise between two layout_transforms,
// compiled and run, against the reference NCHW conv loop (double
// accumulation) on shapes that exercise the block padding: channels that are
// not a multiple of 16, strides, padding, 5x5 and 7x7 windows; and the
// padded copy's two fills (per 16-channel pixel, or along the row for an
// input block of fewer channels) with a different padding on every side, at
// one and two threads. The 3x3 stride-1 convs are kept direct (WinogradConv
// off): winograd_conv_test covers them as Winograd computes them.
#include <algorithm>
#include <cmath>

#include "compiler/driver/compile.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "runtime/thread_pool.h"
#include "tests/test_util/blocked_conv_graph.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/model_manager_test.h"
#include "tests/test_util/reference_ops.h"

namespace kiln {
namespace {

using engine::CompileResult;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;

constexpr int64_t kBlock = 16;

// The direct blocked conv, whatever its window: Winograd's F(4x4, 3x3) off.
CompileOptions Direct() {
  CompileOptions options;
  options.disabled_passes = {"WinogradConv"};
  return options;
}

using ConvCase = ::kiln::testing::BlockedConvShape;
using ::kiln::testing::PackBlockedConvWeight;

using BlockedConvTest = testing::ModelManagerTest<::testing::TestWithParam<ConvCase>>;

// relu(conv + bias), the conv blocked: NCHW -> NCHW16c -> conv2d_nchwc ->
// relu -> NCHW.
TEST_P(BlockedConvTest, MatchesReferenceConv) {
  const ConvCase p = GetParam();
  auto x = Pseudorandom(p.n * p.c * p.h * p.w, 7);
  auto w = Pseudorandom(p.o * p.c * p.k * p.k, 8);
  auto bias = Pseudorandom(p.o, 9);
  Graph g = ::kiln::testing::BlockedConvReluGraph(p, w, bias);

  auto r = manager_->Compile("m", std::move(g), Direct());
  ASSERT_TRUE(r.ok()) << r.status();
  bool tiled = false;
  for (const auto& k : r->kernels) {
    if (std::find(k.ops.begin(), k.ops.end(), "conv2d_nchwc") != k.ops.end()) {
      tiled = k.schedule.find("gemm") != std::string::npos;
      SCOPED_TRACE(k.schedule);
    }
  }
  EXPECT_TRUE(tiled) << "the blocked conv should take the contraction schedule";
  auto input =
      Tensor::FromBytes({DType::kFloat32, {p.n, p.c, p.h, p.w}},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = manager_->Find("m")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<float> want = kiln::testing::RefConv2DStrided(x, w, bias, p.n, p.c, p.h, p.w, p.o,
                                                            p.k, p.k, p.stride, p.pad);
  for (float& v : want) v = std::max(v, 0.0f);
  const Tensor& out = result->outputs[0];
  ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
  const float* got = static_cast<const float*>(out.data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    OddShapes, BlockedConvTest,
    ::testing::Values(ConvCase{1, 64, 14, 14, 64, 3, 1, 1},  // whole blocks, 3x3 same
                      ConvCase{1, 20, 11, 13, 40, 3, 1, 1},  // C, O not multiples of 16
                      ConvCase{2, 24, 15, 15, 48, 3, 2, 1},  // batch 2, stride 2
                      ConvCase{1, 3, 23, 23, 32, 7, 2, 3},   // a stem: 3 channels, 7x7/2
                      ConvCase{1, 40, 9, 9, 72, 1, 2, 0},    // 1x1 stride 2, no padding
                      ConvCase{1, 16, 6, 6, 16, 3, 1, 0}));  // no padding, tiny

// A blocked conv with its own padding on each side (top, left, bottom,
// right), run at `threads`.
struct PaddedCase {
  int64_t n, c, h, w, o, k, stride;
  int64_t top, left, bottom, right;
  int threads;
  // The graph's input already blocked (zero past C), as a conv reads its
  // producer's output in a chain: no layout_transform fused before the conv.
  bool blocked_input = false;
  int64_t in_block() const { return std::min(c, kBlock); }
  int64_t oh() const { return (h + top + bottom - k) / stride + 1; }
  int64_t ow() const { return (w + left + right - k) / stride + 1; }
};

// relu(conv + bias) in NCHW, accumulated in double, zero outside the input.
std::vector<float> RefPaddedConv(const std::vector<float>& x, const std::vector<float>& w,
                                 const std::vector<float>& bias, const PaddedCase& p) {
  std::vector<float> y(p.n * p.o * p.oh() * p.ow());
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t oy = 0; oy < p.oh(); ++oy)
        for (int64_t ox = 0; ox < p.ow(); ++ox) {
          double acc = bias[o];
          for (int64_t c = 0; c < p.c; ++c)
            for (int64_t ky = 0; ky < p.k; ++ky)
              for (int64_t kx = 0; kx < p.k; ++kx) {
                const int64_t iy = oy * p.stride + ky - p.top, ix = ox * p.stride + kx - p.left;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((n * p.c + c) * p.h + iy) * p.w + ix]) *
                       double(w[((o * p.c + c) * p.k + ky) * p.k + kx]);
              }
          y[((n * p.o + o) * p.oh() + oy) * p.ow() + ox] = static_cast<float>(std::max(acc, 0.0));
        }
  return y;
}

class BlockedConvPaddingTest
    : public testing::ModelManagerTest<::testing::TestWithParam<PaddedCase>> {
 protected:
  void SetUp() override {
    ModelManagerTest::SetUp();
    runtime::SetParallelThreads(GetParam().threads);
  }
};

TEST_P(BlockedConvPaddingTest, MatchesReferenceConv) {
  const PaddedCase p = GetParam();
  const int64_t ib = p.in_block();
  const int64_t ob = (p.o + kBlock - 1) / kBlock, cb = (p.c + ib - 1) / ib;
  auto x = Pseudorandom(p.n * p.c * p.h * p.w, 27);
  auto w = Pseudorandom(p.o * p.c * p.k * p.k, 28);
  auto bias = Pseudorandom(p.o, 29);
  std::vector<float> blocked_bias(ob * kBlock, 0.0f);
  std::copy(bias.begin(), bias.end(), blocked_bias.begin());
  const ConvCase shape{p.n, p.c, p.h, p.w, p.o, p.k, p.stride, 0};

  Graph g;
  Node* blocked;
  std::vector<float> fed = x;
  std::vector<int64_t> fed_shape{p.n, p.c, p.h, p.w};
  if (p.blocked_input) {
    fed_shape = {p.n, cb, p.h, p.w, ib};
    fed.assign(p.n * cb * p.h * p.w * ib, 0.0f);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t i = 0; i < p.h * p.w; ++i) {
          fed[((n * cb + c / ib) * p.h * p.w + i) * ib + c % ib] = x[(n * p.c + c) * p.h * p.w + i];
        }
    blocked = g.AddInput("x", {DType::kFloat32, fed_shape});
  } else {
    Node* in = g.AddInput("x", {DType::kFloat32, fed_shape});
    blocked = Op(g, "layout_transform", {in}, LayoutTransformAttrs{0, ib, 0});
  }
  Conv2DAttrs a;
  a.strides = {p.stride, p.stride};
  a.padding = {p.top, p.left, p.bottom, p.right};
  Node* weight = g.AddConstant(
      "w", FloatValues({ob, cb, p.k, p.k, ib, kBlock}, PackBlockedConvWeight(w, shape)));
  Node* b = g.AddConstant("b", FloatValues({ob, kBlock}, blocked_bias));
  Node* conv = Op(g, "conv2d_nchwc", {blocked, weight, b}, a);
  Node* relu = Op(g, "relu", {conv});
  g.AddOutput(Op(g, "layout_transform", {relu}, LayoutTransformAttrs{kBlock, 0, p.o}));

  auto r = manager_->Compile("m", std::move(g), Direct());
  ASSERT_TRUE(r.ok()) << r.status();
  bool tiled = false;
  for (const auto& k : r->kernels) {
    if (std::find(k.ops.begin(), k.ops.end(), "conv2d_nchwc") != k.ops.end()) {
      tiled = k.schedule.find("gemm") != std::string::npos;
    }
  }
  EXPECT_TRUE(tiled) << "the blocked conv should take the contraction schedule";
  auto input = Tensor::FromBytes(
      {DType::kFloat32, fed_shape},
      absl::string_view(reinterpret_cast<const char*>(fed.data()), fed.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = manager_->Find("m")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<float> want = RefPaddedConv(x, w, bias, p);
  const Tensor& out = result->outputs[0];
  ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
  const float* got = static_cast<const float*>(out.data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

// Input blocks of 3 and 5 channels take the interleaved copy along the row
// (a stem's); 1 channel and whole blocks one line per pixel, behind a fused
// layout_transform or read as they are (blocked_input, as in a conv chain).
INSTANTIATE_TEST_SUITE_P(
    EverySide, BlockedConvPaddingTest,
    ::testing::Values(PaddedCase{1, 3, 13, 13, 64, 7, 2, 3, 2, 1, 3, 1},   // stem-like 7x7/2
                      PaddedCase{3, 3, 13, 13, 32, 7, 2, 3, 2, 1, 3, 2},   // batch 3, 2 threads
                      PaddedCase{1, 5, 7, 7, 24, 3, 1, 0, 1, 2, 0, 1},     // 5 channels, 7x7
                      PaddedCase{3, 5, 13, 7, 16, 3, 2, 2, 0, 1, 1, 2},    // odd sizes, stride 2
                      PaddedCase{1, 1, 13, 13, 16, 3, 1, 1, 1, 1, 1, 1},   // one channel
                      PaddedCase{1, 3, 40, 37, 32, 3, 2, 1, 0, 0, 1, 2},   // rows past a vector
                      PaddedCase{1, 20, 13, 13, 40, 3, 1, 2, 1, 0, 1, 1},  // C, O not whole
                      PaddedCase{3, 40, 7, 7, 24, 3, 2, 1, 2, 2, 1, 2},    // batch 3, stride 2
                      PaddedCase{1, 20, 7, 7, 16, 1, 1, 1, 0, 0, 1, 1},    // padded 1x1
                      PaddedCase{3, 20, 13, 13, 40, 7, 2, 3, 3, 2, 2, 2},  // 7x7, 16-lane fill
                      PaddedCase{1, 64, 13, 13, 32, 3, 1, 1, 2, 0, 1, 1, true},   // row copy
                      PaddedCase{3, 20, 7, 7, 40, 3, 2, 2, 1, 1, 0, 2, true},     // batch 3, /2
                      PaddedCase{1, 24, 13, 7, 16, 7, 1, 3, 0, 2, 3, 1, true},    // 7x7, odd
                      PaddedCase{3, 40, 7, 13, 24, 1, 1, 0, 1, 1, 0, 2, true}));  // padded 1x1

struct DepthwiseCase {
  int64_t n, c, h, w, k, stride, pad, dilation = 1;
  // Whether the parallel loop must run over chunks of rows too (few planes).
  bool row_chunks = false;
};

using BlockedDepthwiseTest = testing::ModelManagerTest<::testing::TestWithParam<DepthwiseCase>>;

// clip(depthwise conv + bias, 0, 6) (ReLU6, as in MobileNet), blocked:
// NCHW -> NCHW16c -> conv2d_nchwc_depthwise -> clip -> NCHW. The reference
// is each channel's own conv (RefConv2DStrided with one channel).
TEST_P(BlockedDepthwiseTest, MatchesReferenceConv) {
  const DepthwiseCase p = GetParam();
  const int64_t cb = (p.c + kBlock - 1) / kBlock;
  auto x = Pseudorandom(p.n * p.c * p.h * p.w, 17);
  auto w = Pseudorandom(p.c * p.k * p.k, 18);
  auto bias = Pseudorandom(p.c, 19);
  // C, 1, KH, KW -> C/16, KH, KW, 16, zero past C.
  std::vector<float> packed(cb * p.k * p.k * kBlock, 0.0f), blocked_bias(cb * kBlock, 0.0f);
  for (int64_t c = 0; c < p.c; ++c) {
    for (int64_t t = 0; t < p.k * p.k; ++t) {
      packed[((c / kBlock) * p.k * p.k + t) * kBlock + c % kBlock] = w[c * p.k * p.k + t];
    }
    blocked_bias[c] = bias[c];
  }

  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {p.n, p.c, p.h, p.w}});
  Node* blocked = Op(g, "layout_transform", {in}, LayoutTransformAttrs{0, kBlock, 0});
  Conv2DAttrs a;
  a.strides = {p.stride, p.stride};
  a.padding = {p.pad, p.pad, p.pad, p.pad};
  a.groups = p.c;
  a.dilation = {p.dilation, p.dilation};
  Node* weight = g.AddConstant("w", FloatValues({cb, p.k, p.k, kBlock}, packed));
  Node* b = g.AddConstant("b", FloatValues({cb, kBlock}, blocked_bias));
  Node* conv = Op(g, "conv2d_nchwc_depthwise", {blocked, weight, b}, a);
  ActivationAttrs six;
  six.alpha = 0;
  six.beta = 6;
  Node* relu6 = Op(g, "clip", {conv}, six);
  g.AddOutput(Op(g, "layout_transform", {relu6}, LayoutTransformAttrs{kBlock, 0, p.c}));

  auto r = manager_->Compile("m", std::move(g), {});
  ASSERT_TRUE(r.ok()) << r.status();
  bool tiled = false;
  for (const auto& k : r->kernels) {
    if (std::find(k.ops.begin(), k.ops.end(), "conv2d_nchwc_depthwise") != k.ops.end()) {
      tiled = k.schedule.find("blocked depthwise") != std::string::npos;
      if (p.row_chunks) EXPECT_NE(k.schedule.find("rows in"), std::string::npos) << k.schedule;
      // The clip is the conv's epilogue, not a kernel of its own.
      EXPECT_NE(std::find(k.ops.begin(), k.ops.end(), "clip"), k.ops.end()) << k.schedule;
    }
  }
  EXPECT_TRUE(tiled) << "the depthwise conv should take its register-tiled lowering";
  auto input =
      Tensor::FromBytes({DType::kFloat32, {p.n, p.c, p.h, p.w}},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = manager_->Find("m")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  // A dilated kernel is the dense kernel of its span with zeros between taps.
  const int64_t span = (p.k - 1) * p.dilation + 1;
  const int64_t oh = (p.h + 2 * p.pad - span) / p.stride + 1;
  const int64_t ow = (p.w + 2 * p.pad - span) / p.stride + 1;
  std::vector<float> want;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      std::vector<float> plane(x.begin() + (n * p.c + c) * p.h * p.w,
                               x.begin() + (n * p.c + c + 1) * p.h * p.w);
      std::vector<float> kernel(span * span, 0.0f);
      for (int64_t ky = 0; ky < p.k; ++ky) {
        for (int64_t kx = 0; kx < p.k; ++kx) {
          kernel[ky * p.dilation * span + kx * p.dilation] = w[(c * p.k + ky) * p.k + kx];
        }
      }
      std::vector<float> y = kiln::testing::RefConv2DStrided(
          plane, kernel, {bias[c]}, 1, 1, p.h, p.w, 1, span, span, p.stride, p.pad);
      ASSERT_EQ(static_cast<int64_t>(y.size()), oh * ow);
      for (float v : y) want.push_back(std::min(std::max(v, 0.0f), 6.0f));
    }
  }
  const Tensor& out = result->outputs[0];
  ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
  const float* got = static_cast<const float*>(out.data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    OddShapes, BlockedDepthwiseTest,
    ::testing::Values(DepthwiseCase{1, 32, 14, 14, 3, 1, 1},     // whole blocks, 3x3 same
                      DepthwiseCase{1, 20, 11, 13, 3, 1, 1},     // C not a multiple of 16
                      DepthwiseCase{2, 24, 15, 15, 3, 2, 1},     // batch 2, stride 2
                      DepthwiseCase{1, 40, 13, 12, 5, 2, 2},     // 5x5 stride 2
                      DepthwiseCase{1, 16, 9, 10, 7, 1, 3},      // 7x7 (ConvNeXt)
                      DepthwiseCase{1, 18, 8, 8, 3, 1, 0},       // no padding
                      DepthwiseCase{2, 8, 9, 9, 3, 1, 1},        // fewer channels than a block
                      DepthwiseCase{3, 48, 7, 7, 5, 1, 2},       // batch 3, 5x5 same
                      DepthwiseCase{1, 32, 17, 17, 3, 1, 4, 4},  // dilation 4 (DeepLabV3)
                      DepthwiseCase{1, 16, 6, 6, 3, 1, 2, 2},    // dilated, all border
                      // One plane: its 38 interior rows in 9 chunks of 4, 2 rows left over.
                      DepthwiseCase{1, 16, 40, 40, 3, 1, 1, 1, true},
                      // Batch 3, stride 2: 3 planes, 14 interior rows in 3 chunks of 4, 2 over.
                      DepthwiseCase{3, 16, 30, 29, 3, 2, 1, 1, true},
                      // 5x5 stride 2, 2 planes of 20 channels (padded lanes), 22 rows: 5 x 4 + 2.
                      DepthwiseCase{1, 20, 47, 45, 5, 2, 2, 1, true}));

}  // namespace
}  // namespace kiln
