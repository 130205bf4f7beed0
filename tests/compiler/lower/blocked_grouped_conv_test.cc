// Grouped convs whose groups lie within one channel block (group width 16, 8,
// 4 or 2; RegNet's is 8), compiled with ConvertLayoutNchwc on, against float64
// loops written here: a lone conv on shapes that exercise the block padding
// (104 channels), strides, padding and batches; and a RegNet-like block
// (1x1 conv, grouped 3x3 conv, squeeze-excitation, 1x1 conv, strided
// shortcut, residual add), which kAuto must convert whole.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/status_macros.h"
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

// NCHW x (O, C/groups, K, K) with stride and symmetric zero padding, an
// optional bias, accumulated in float64.
std::vector<double> RefGroupedConv(const std::vector<double>& x, const std::vector<float>& w,
                                   const std::vector<float>& bias, int64_t n, int64_t c, int64_t h,
                                   int64_t wd, int64_t o, int64_t groups, int64_t k, int64_t stride,
                                   int64_t pad) {
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
  const int64_t in_per_group = c / groups, out_per_group = o / groups;
  std::vector<double> y(n * o * oh * ow);
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oi = 0; oi < o; ++oi)
      for (int64_t yi = 0; yi < oh; ++yi)
        for (int64_t xi = 0; xi < ow; ++xi) {
          double acc = bias.empty() ? 0.0 : bias[oi];
          const int64_t first = oi / out_per_group * in_per_group;
          for (int64_t j = 0; j < in_per_group; ++j)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = yi * stride + ky - pad, ix = xi * stride + kx - pad;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += x[((ni * c + first + j) * h + iy) * wd + ix] *
                       static_cast<double>(w[((oi * in_per_group + j) * k + ky) * k + kx]);
              }
          y[((ni * o + oi) * oh + yi) * ow + xi] = acc;
        }
  return y;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

Tensor FloatTensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  auto t = Tensor::FromBytes(
      {DType::kFloat32, std::move(shape)},
      absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  KILN_CHECK(t.ok());
  return *std::move(t);
}

void ExpectNear(const Tensor& got_tensor, const std::vector<double>& want, double tolerance) {
  ASSERT_EQ(got_tensor.type().NumElements(), static_cast<int64_t>(want.size()));
  const float* got = static_cast<const float*>(got_tensor.data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0, std::fabs(want[i]))) << "at " << i;
  }
}

int CountKernelOps(const engine::CompileResult& r, const std::string& op) {
  int count = 0;
  for (const auto& k : r.kernels) count += std::count(k.ops.begin(), k.ops.end(), op);
  return count;
}

struct GroupedCase {
  int64_t n, c, h, w, width, k, stride, pad;
};

class BlockedGroupedConvTest : public ::testing::TestWithParam<GroupedCase> {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  std::unique_ptr<ModelManager> manager_;
};

// relu(grouped conv + bias), NCHW in and out, ConvertLayoutNchwc forced on.
TEST_P(BlockedGroupedConvTest, MatchesFloat64Loop) {
  const GroupedCase p = GetParam();
  const int64_t groups = p.c / p.width;
  auto x = Pseudorandom(p.n * p.c * p.h * p.w, 51);
  auto w = Pseudorandom(p.c * p.width * p.k * p.k, 52);
  auto bias = Pseudorandom(p.c, 53);
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {p.n, p.c, p.h, p.w}});
  Conv2DAttrs a;
  a.strides = {p.stride, p.stride};
  a.padding = {p.pad, p.pad, p.pad, p.pad};
  a.groups = groups;
  Node* conv = Op(g, "conv2d",
                  {in, g.AddConstant("w", FloatValues({p.c, p.width, p.k, p.k}, w)),
                   g.AddConstant("b", FloatValues({p.c}, bias))},
                  a);
  g.AddOutput(Op(g, "relu", {conv}));

  CompileOptions options;
  options.nchwc_layout = NchwcLayout::kOn;
  options.kernel_bounds_checks = true;
  auto r = manager_->Compile("m", std::move(g), options);
  ASSERT_TRUE(r.ok()) << r.status();
  // Groups narrower than a block take the grouped op's register tiles; a
  // group a block is a conv2d_nchwc with one group per block.
  const bool narrow = p.width < 16;
  EXPECT_EQ(CountKernelOps(*r, narrow ? "conv2d_nchwc_grouped" : "conv2d_nchwc"), 1)
      << "the grouped conv should run blocked";
  EXPECT_EQ(CountKernelOps(*r, "conv2d"), 0);
  for (const auto& k : r->kernels) {
    if (narrow && std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_grouped")) {
      EXPECT_NE(k.schedule.find("blocked grouped"), std::string::npos) << k.schedule;
    }
  }
  Tensor input = FloatTensor({p.n, p.c, p.h, p.w}, x);
  auto result = manager_->Find("m")->Run({&input});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<double> want =
      RefGroupedConv(ToDouble(x), w, bias, p.n, p.c, p.h, p.w, p.c, groups, p.k, p.stride, p.pad);
  for (double& v : want) v = std::max(v, 0.0);
  ExpectNear(result->outputs[0], want, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    GroupWidths, BlockedGroupedConvTest,
    ::testing::Values(GroupedCase{1, 104, 13, 13, 8, 3, 1, 1},    // RegNet's width, 6.5 blocks
                      GroupedCase{3, 104, 13, 11, 8, 3, 2, 1},    // batch 3, stride 2
                      GroupedCase{1, 48, 16, 16, 8, 3, 2, 1},     // whole blocks, stride 2
                      GroupedCase{1, 40, 9, 9, 4, 3, 1, 1},       // width 4, 2.5 blocks
                      GroupedCase{3, 20, 8, 10, 4, 3, 2, 1},      // width 4, batch 3, stride 2
                      GroupedCase{1, 24, 7, 7, 2, 3, 1, 0},       // width 2, no padding
                      GroupedCase{1, 32, 9, 9, 8, 1, 1, 0},       // 1x1 grouped
                      GroupedCase{1, 48, 10, 10, 16, 3, 1, 1}));  // width 16: a block a group

// Groups wider than a block, or narrower ones whose width does not divide
// it, stay NCHW: the pass leaves the conv alone.
TEST(ConvertLayoutNchwcGroupedTest, LeavesGroupsThatStraddleBlocksNchw) {
  for (int64_t width : {32, 6}) {
    Graph g;
    const int64_t c = 96;
    Node* in = g.AddInput("x", {DType::kFloat32, {1, c, 8, 8}});
    Conv2DAttrs a;
    a.padding = {1, 1, 1, 1};
    a.groups = c / width;
    Node* conv = Op(
        g, "conv2d",
        {in, g.AddConstant("w", FloatValues({c, width, 3, 3}, Pseudorandom(c * width * 9, 3)))}, a);
    g.AddOutput(Op(g, "relu", {conv}));
    PassContext ctx;
    ctx.config.nchwc_layout = NchwcLayout::kOn;
    ASSERT_TRUE(CreateInferTypePass()->Run(g, ctx).ok());
    auto changed = CreateConvertLayoutNchwcPass()->Run(g, ctx);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_FALSE(*changed) << "width " << width;
  }
}

// A conv2d_nchwc with groups must have one group per channel block.
TEST(ConvertLayoutNchwcGroupedTest, BlockedConvRejectsGroupsOtherThanBlocks) {
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {1, 3, 8, 8, 16}});
  Conv2DAttrs a;
  a.groups = 2;
  Node* w =
      g.AddConstant("w", FloatValues({3, 1, 1, 1, 16, 16}, std::vector<float>(3 * 16 * 16, 1.0f)));
  g.AddOutput(Op(g, "conv2d_nchwc", {in, w}, a));
  PassContext ctx;
  auto typed = CreateInferTypePass()->Run(g, ctx);
  EXPECT_EQ(typed.status().code(), absl::StatusCode::kInvalidArgument) << typed.status();
}

// A RegNet Y block at stride 2 on channels that are not whole blocks:
//   y = relu(conv1x1(x))                      24 -> 40
//   y = relu(grouped conv3x3/2(y))            width 8 (5 groups)
//   y = y * sigmoid(conv(relu(conv(mean(y)))))  squeeze-excitation 40 -> 8 -> 40
//   out = relu(conv1x1(y) + conv1x1/2(x))     the shortcut strided
constexpr int64_t kN = 3, kC = 24, kO = 40, kWidth = 8, kSe = 8, kHw = 14, kOut = 7;

struct BlockWeights {
  std::vector<float> wa = Pseudorandom(kO * kC, 61), ba = Pseudorandom(kO, 62);
  std::vector<float> wb = Pseudorandom(kO * kWidth * 9, 63), bb = Pseudorandom(kO, 64);
  std::vector<float> w_se1 = Pseudorandom(kSe * kO, 65), b_se1 = Pseudorandom(kSe, 66);
  std::vector<float> w_se2 = Pseudorandom(kO * kSe, 67), b_se2 = Pseudorandom(kO, 68);
  std::vector<float> wc = Pseudorandom(kO * kO, 69), bc = Pseudorandom(kO, 70);
  std::vector<float> ws = Pseudorandom(kO * kC, 71);
};

Graph RegNetBlock(const BlockWeights& w) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {kN, kC, kHw, kHw}});
  auto conv = [&](Node* in, const std::string& name, int64_t o, int64_t c, int64_t k,
                  const std::vector<float>& wv, const std::vector<float>* bv, Conv2DAttrs a) {
    std::vector<Node*> inputs{in, g.AddConstant(name, FloatValues({o, c, k, k}, wv))};
    if (bv != nullptr) inputs.push_back(g.AddConstant(name + "_b", FloatValues({o}, *bv)));
    return Op(g, "conv2d", std::move(inputs), a);
  };
  Node* a = Op(g, "relu", {conv(x, "wa", kO, kC, 1, w.wa, &w.ba, {})});
  Conv2DAttrs grouped;
  grouped.strides = {2, 2};
  grouped.padding = {1, 1, 1, 1};
  grouped.groups = kO / kWidth;
  Node* b = Op(g, "relu", {conv(a, "wb", kO, kWidth, 3, w.wb, &w.bb, grouped)});
  Node* pooled = Op(g, "mean", {b}, ReduceAttrs{{2, 3}, true});
  Node* s1 = Op(g, "relu", {conv(pooled, "w_se1", kSe, kO, 1, w.w_se1, &w.b_se1, {})});
  Node* s2 = Op(g, "sigmoid", {conv(s1, "w_se2", kO, kSe, 1, w.w_se2, &w.b_se2, {})});
  Node* excited = Op(g, "mul", {b, s2});
  Node* c = conv(excited, "wc", kO, kO, 1, w.wc, &w.bc, {});
  Conv2DAttrs strided;
  strided.strides = {2, 2};
  Node* shortcut = conv(x, "ws", kO, kC, 1, w.ws, nullptr, strided);
  g.AddOutput(Op(g, "relu", {Op(g, "add", {c, shortcut})}));
  return g;
}

std::vector<double> RegNetBlockReference(const BlockWeights& w, const std::vector<float>& x) {
  auto relu = [](std::vector<double> v) {
    for (double& e : v) e = std::max(e, 0.0);
    return v;
  };
  const std::vector<double> xd = ToDouble(x);
  std::vector<double> a = relu(RefGroupedConv(xd, w.wa, w.ba, kN, kC, kHw, kHw, kO, 1, 1, 1, 0));
  std::vector<double> b =
      relu(RefGroupedConv(a, w.wb, w.bb, kN, kO, kHw, kHw, kO, kO / kWidth, 3, 2, 1));
  constexpr int64_t plane = kOut * kOut;
  std::vector<double> pooled(kN * kO);
  for (int64_t i = 0; i < kN * kO; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < plane; ++j) sum += b[i * plane + j];
    pooled[i] = sum / plane;
  }
  std::vector<double> s1 =
      relu(RefGroupedConv(pooled, w.w_se1, w.b_se1, kN, kO, 1, 1, kSe, 1, 1, 1, 0));
  std::vector<double> s2 = RefGroupedConv(s1, w.w_se2, w.b_se2, kN, kSe, 1, 1, kO, 1, 1, 1, 0);
  for (int64_t i = 0; i < kN * kO; ++i) {
    const double scale = 1.0 / (1.0 + std::exp(-s2[i]));
    for (int64_t j = 0; j < plane; ++j) b[i * plane + j] *= scale;
  }
  std::vector<double> c = RefGroupedConv(b, w.wc, w.bc, kN, kO, kOut, kOut, kO, 1, 1, 1, 0);
  std::vector<double> shortcut = RefGroupedConv(xd, w.ws, {}, kN, kC, kHw, kHw, kO, 1, 1, 2, 0);
  for (size_t i = 0; i < c.size(); ++i) c[i] += shortcut[i];
  return relu(c);
}

TEST(ConvertLayoutNchwcGroupedTest, RegNetBlockMatchesFloat64Reference) {
  auto m = ModelManager::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  BlockWeights w;
  auto x = Pseudorandom(kN * kC * kHw * kHw, 72);
  CompileOptions options;  // kAuto: the whole block converts
  options.kernel_bounds_checks = true;
  auto r = (*m)->Compile("regnet_block", RegNetBlock(w), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(CountKernelOps(*r, "conv2d_nchwc_grouped"), 1);
  EXPECT_EQ(CountKernelOps(*r, "conv2d_nchwc"), 5);  // the SE's two and the shortcut too
  EXPECT_EQ(CountKernelOps(*r, "conv2d"), 0);
  Tensor input = FloatTensor({kN, kC, kHw, kHw}, x);
  auto result = (*m)->Find("regnet_block")->Run({&input});
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectNear(result->outputs[0], RegNetBlockReference(w, x), 1e-4);
}

}  // namespace
}  // namespace kiln
