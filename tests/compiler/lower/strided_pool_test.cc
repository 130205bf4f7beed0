// Pools whose output row steps through the input by 2 (or 1): max pools run
// separable (pool_planes.cc), average pools of stride 2 unroll the short
// window inside the vector loop (RowAccumulated). Checked against a plain
// reference loop, with padding that clamps at both edges and an odd width.
// Pools over large planes also prefetch the next plane.
#include <algorithm>
#include <cmath>
#include <utility>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/model_manager.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::lower {
namespace {

using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using engine::ModelManager;
using runtime::Tensor;

// max or average (padding excluded) over a k x k window, stride s, padding p;
// NaN wherever the window holds one.
std::vector<float> RefPool(const std::vector<float>& x, int64_t c, int64_t h, int64_t w,
                           int64_t k, int64_t s, int64_t p, bool average) {
  const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
  std::vector<float> y(c * oh * ow);
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t yi = 0; yi < oh; ++yi)
      for (int64_t xi = 0; xi < ow; ++xi) {
        double acc = average ? 0.0 : -std::numeric_limits<double>::infinity();
        int count = 0;
        bool nan = false;
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t iy = yi * s + ky - p, ix = xi * s + kx - p;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[(ci * h + iy) * w + ix];
            nan |= std::isnan(v);
            acc = average ? acc + v : std::max(acc, v);
            ++count;
          }
        y[(ci * oh + yi) * ow + xi] = nan ? std::numeric_limits<float>::quiet_NaN()
                                          : static_cast<float>(average ? acc / count : acc);
      }
  return y;
}

// Also with each loop pass disabled in turn: the pool is where partitioning
// and strided blocking both apply, and each must change speed, not results.
TEST(StridedPoolTest, ThreeByThreeStrideTwoMatchesReference) {
  auto manager = ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  for (const char* disabled : {"", "LowerLoops", "PartitionBoundaryLoops", "BlockStridedVectorLoops",
                               "SimplifyIndices", "ReassociateIndices"}) {
    for (const char* op : {"max_pool2d", "avg_pool2d"}) {
      for (auto [w, s] : {std::pair<int64_t, int64_t>{37, 2}, {112, 2}, {14, 1}, {29, 1}}) {
        const int64_t c = 3, h = 21, k = 3, p = 1;
        SCOPED_TRACE(absl::StrCat(op, " width ", w, " stride ", s, " disabled: ", disabled));
        CompileOptions options;
        if (*disabled) options.disabled_passes = {disabled};
        auto x = Pseudorandom(c * h * w, 50 + w);
        // Max pools also read NaN (the result is NaN where a window holds one).
        if (std::string(op) == "max_pool2d") {
          for (size_t i = 7; i < x.size(); i += 41) x[i] = std::numeric_limits<float>::quiet_NaN();
        }
        Graph g;
        Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, w}});
        Pool2DAttrs attrs;
        attrs.kernel = {k, k};
        attrs.strides = {s, s};
        attrs.padding = {p, p, p, p};
        g.AddOutput(Op(g, op, {in}, attrs));
        auto compiled = (*manager)->Compile("pool", std::move(g), options);
        ASSERT_TRUE(compiled.ok()) << compiled.status();
        auto input = Tensor::FromBytes(
            {DType::kFloat32, {1, c, h, w}},
            absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
        ASSERT_TRUE(input.ok());
        const std::vector<const Tensor*> inputs{&*input};
        auto result = (*manager)->Find("pool")->Run(inputs);
        ASSERT_TRUE(result.ok()) << result.status();
        const std::string name = op;
        auto want = RefPool(x, c, h, w, k, s, p, name == "avg_pool2d");
        const float* got = static_cast<const float*>(result->outputs[0].data());
        ASSERT_EQ(result->outputs[0].type().NumElements(), static_cast<int64_t>(want.size()));
        for (size_t i = 0; i < want.size(); ++i) {
          if (std::isnan(want[i])) {
            ASSERT_TRUE(std::isnan(got[i])) << "at " << i;
          } else {
            ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
          }
        }
      }
    }
  }
}

// The loop function of a 3x3 max pool of `stride`, padding 1, over an input
// of `shape` (NCHW, or blocked NCHW16c when 5-D), compiled alone (empty when
// compiling fails). Stride 2 is resnet18's stem pool.
lower::LoopFunction MaxPoolKernel(const std::vector<int64_t>& shape, int64_t stride = 2) {
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, shape});
  Pool2DAttrs attrs;
  attrs.kernel = {3, 3};
  attrs.strides = {stride, stride};
  attrs.padding = {1, 1, 1, 1};
  g.AddOutput(Op(g, "max_pool2d", {in}, attrs));
  auto program = CompileGraph(std::move(g), {});
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  EXPECT_EQ(program->kernels.size(), 1u);
  return program->kernels.empty() ? lower::LoopFunction{} : program->kernels[0].function;
}

// resnet18's pool: its plane of row maxima would be too large for the
// separable form (pool_planes.cc), so the 3x3 window is unrolled whole, each
// output row one pass (no row of accumulators, no temporary), in explicit
// 16-lane blocks whose stride-2 loads codegen makes wide loads and
// shuffles: the kernel has no gathers left.
TEST(StridedPoolTest, ThreeByThreeStrideTwoIsOnePassWithoutGathers) {
  const lower::LoopFunction fn = MaxPoolKernel({1, 64, 112, 112});
  EXPECT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params));
  EXPECT_THAT(lower::LoopFunctionToString(fn), ::testing::HasSubstr("vector for"));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("gather")));
}

// On a 28 x 28 plane (googlenet's stride-2 pool of that size gathered its
// 13 or 14 lanes per row) the pool runs separable: the row maxima of a plane
// (14 rows of 28) on the stack, and the column pass, flat over the output
// plane since 28 == 2 * 14, in explicit 16-lane blocks of stride-2 loads.
TEST(StridedPoolTest, ThreeByThreeStrideTwoOnSmallPlanesIsSeparable) {
  const lower::LoopFunction fn = MaxPoolKernel({1, 8, 28, 28});
  const std::string nest = lower::LoopFunctionToString(fn);
  ASSERT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params) + 1) << nest;
  EXPECT_TRUE(fn.buffers.back().local);
  EXPECT_EQ(fn.buffers.back().num_elements, 14 * 28);
  EXPECT_THAT(nest, ::testing::HasSubstr("vector for"));
}

// A pool over large planes prefetches the next plane while its rows run;
// over small ones (which come from L2 anyway) it does not. A prefetch changes
// no value: the reference test above covers a prefetching 21 x 112 plane.
TEST(StridedPoolTest, LargePlanesPrefetchTheNextPlane) {
  for (int64_t h : {112, 28}) {
    SCOPED_TRACE(absl::StrCat("plane ", h, " x ", h));
    const std::string nest = lower::LoopFunctionToString(MaxPoolKernel({2, 8, h, h}));
    if (h == 112) {
      EXPECT_THAT(nest, ::testing::HasSubstr("prefetch"));
    } else {
      EXPECT_THAT(nest, ::testing::Not(::testing::HasSubstr("prefetch")));
    }
  }
}

// A blocked max pool of stride 1 (googlenet's inception branches) runs
// separable: a band of one row of W pixels on the stack; one of stride 2
// reads its window pixel by pixel (no band).
TEST(StridedPoolTest, BlockedStrideOneMaxPoolIsSeparable) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("stride ", stride));
    const lower::LoopFunction fn = MaxPoolKernel({1, 4, 14, 14, 16}, stride);
    if (stride == 1) {
      ASSERT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params) + 1);
      EXPECT_TRUE(fn.buffers.back().local);
      EXPECT_EQ(fn.buffers.back().num_elements, 14 * 16);
    } else {
      EXPECT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params));
    }
  }
}

// A blocked pool's pixel (16 lanes) is one vector value, not a loop left to
// LLVM's vectoriser (which put a runtime alias check and a scalar copy of
// the window around each pixel).
TEST(StridedPoolTest, BlockedPoolPixelsAreVectorValues) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("stride ", stride));
    const std::string nest = lower::LoopFunctionToString(MaxPoolKernel({1, 4, 14, 14, 16}, stride));
    EXPECT_THAT(nest, ::testing::HasSubstr("vector for"));
    EXPECT_THAT(nest, ::testing::Not(::testing::HasSubstr("vectorized for"))) << nest;
  }
}

// Pools in 16-channel blocks (N, C/16, H, W, 16), as ConvertLayoutNchwc
// leaves them: max pools of horizontal stride 1 run separable through a band
// of one row (pool_planes.cc); the others pixel by pixel, their pixel loops
// split at the padding (PartitionBoundaryLoops), which must change speed, not
// results. Padding on every side and on some, strides 1 and 2 (and 2 by 1),
// ceil mode's extra bottom and right windows, dilation, 2x2, 3x2 and 5x5
// windows; odd planes and googlenet's 7 to 56, two images. Max pools read NaN
// at scattered pixels and lanes (and -inf, +inf, -0): the result is NaN
// wherever the window holds one.
struct BlockedCase {
  int64_t h, w;
  std::vector<int64_t> kernel, strides;
  std::vector<int64_t> padding;  // top, left, bottom, right
  int64_t dilation = 1;
  bool ceil_mode = false;
};

std::string BlockedCaseName(const BlockedCase& c) {
  return absl::StrCat(c.h, "x", c.w, " k", c.kernel[0], "x", c.kernel[1], " s", c.strides[0], ",",
                      c.strides[1], " pad ", c.padding[0], ",", c.padding[1], ",", c.padding[2],
                      ",", c.padding[3], " d", c.dilation, c.ceil_mode ? " ceil" : "");
}

// Inputs for a blocked pool: pseudorandom, and for `special` every 29th
// element NaN and a few infinities and negative zeros between.
std::vector<float> BlockedInput(int64_t size, int seed, bool special) {
  std::vector<float> x = Pseudorandom(size, seed);
  if (!special) return x;
  for (int64_t i = 5; i < size; i += 29) x[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 11; i < size; i += 97) x[i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = 23; i < size; i += 101) x[i] = std::numeric_limits<float>::infinity();
  for (int64_t i = 2; i < size; i += 53) x[i] = -0.0f;
  return x;
}

// Compiles the pool `op` of `c` over blocked input x (n images, `blocks`
// 16-lane blocks), runs it and checks every output against a float64 loop.
void ExpectBlockedPoolMatches(ModelManager& manager, const char* op, const BlockedCase& c,
                              int64_t n, int64_t blocks, const std::vector<float>& x,
                              const CompileOptions& options) {
  constexpr int64_t kLanes = 16;
  const std::vector<int64_t> shape{n, blocks, c.h, c.w, kLanes};
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, shape});
  Pool2DAttrs attrs;
  attrs.kernel = c.kernel;
  attrs.strides = c.strides;
  attrs.padding = c.padding;
  attrs.dilation = {c.dilation, c.dilation};
  attrs.ceil_mode = c.ceil_mode;
  g.AddOutput(Op(g, op, {in}, attrs));
  auto compiled = manager.Compile("blocked", std::move(g), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto input =
      Tensor::FromBytes({DType::kFloat32, shape},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = manager.Find("blocked")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const Tensor& out = result->outputs[0];
  auto out_dim = [&](int d, int64_t size) {
    const int64_t k = c.kernel[d], s = c.strides[d], before = c.padding[d];
    const int64_t span = size + before + c.padding[d + 2] - c.dilation * (k - 1) - 1;
    int64_t o = (c.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (c.ceil_mode && (o - 1) * s >= size + before) --o;
    return o;
  };
  const int64_t oh = out_dim(0, c.h), ow = out_dim(1, c.w);
  ASSERT_EQ(out.type().shape, (std::vector<int64_t>{n, blocks, oh, ow, kLanes}));
  const float* got = static_cast<const float*>(out.data());
  const bool average = std::string(op) == "avg_pool2d";
  for (int64_t plane = 0; plane < n * blocks; ++plane) {
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = average ? 0.0 : -std::numeric_limits<double>::infinity();
          int count = 0;
          bool nan = false;
          for (int64_t ky = 0; ky < c.kernel[0]; ++ky) {
            for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
              const int64_t iy = oy * c.strides[0] + ky * c.dilation - c.padding[0];
              const int64_t ix = ox * c.strides[1] + kx * c.dilation - c.padding[1];
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              const double v = x[((plane * c.h + iy) * c.w + ix) * kLanes + lane];
              nan |= std::isnan(v);
              acc = average ? acc + v : std::max(acc, v);
              ++count;
            }
          }
          const double want = average ? acc / count : acc;
          const float value = got[((plane * oh + oy) * ow + ox) * kLanes + lane];
          if (nan) {
            ASSERT_TRUE(std::isnan(value))
                << "plane " << plane << " lane " << lane << " at " << oy << "," << ox;
          } else if (!average) {
            ASSERT_EQ(value, want)
                << "plane " << plane << " lane " << lane << " at " << oy << "," << ox;
          } else {
            ASSERT_NEAR(value, want, 1e-5 * std::max(1.0, std::fabs(want)))
                << "plane " << plane << " lane " << lane << " at " << oy << "," << ox;
          }
        }
      }
    }
  }
}

TEST(StridedPoolTest, BlockedPoolsMatchReference) {
  auto manager = ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const int64_t n = 2, blocks = 2;
  const std::vector<BlockedCase> cases = {
      {13, 11, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {13, 11, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {13, 11, {3, 3}, {2, 2}, {0, 0, 1, 1}},
      {13, 11, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, /*ceil_mode=*/true},
      {13, 11, {3, 3}, {1, 1}, {2, 2, 2, 2}, /*dilation=*/2},
      {13, 11, {3, 3}, {1, 1}, {0, 0, 0, 0}},
      {13, 11, {5, 5}, {1, 1}, {2, 2, 2, 2}},
      {13, 11, {3, 2}, {1, 1}, {0, 1, 2, 1}},
      {13, 11, {3, 3}, {2, 1}, {1, 1, 1, 1}, 1, true},
      {7, 7, {3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},
      {14, 14, {3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},
      {14, 14, {2, 2}, {2, 2}, {0, 0, 0, 0}, 1, true},
      {28, 28, {3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},
      {28, 28, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, true},
      {56, 56, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {56, 56, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, true},
      {56, 56, {3, 3}, {2, 2}, {1, 1, 1, 1}},
  };
  for (const char* disabled : {"", "PartitionBoundaryLoops"}) {
    for (const char* op : {"max_pool2d", "avg_pool2d"}) {
      for (const BlockedCase& c : cases) {
        SCOPED_TRACE(absl::StrCat(op, " ", BlockedCaseName(c), " disabled: ", disabled));
        CompileOptions options;
        if (*disabled) options.disabled_passes = {disabled};
        const bool max = std::string(op) == "max_pool2d";
        const std::vector<float> x =
            BlockedInput(n * blocks * c.h * c.w * 16, 90 + c.strides[0] + c.h, max);
        ExpectBlockedPoolMatches(**manager, op, c, n, blocks, x, options);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::lower
