// Register tiles of five to seven vectors (80, 96 and 112 output channels in
// one tile: TileIsLegal), forced by a schedule override as the tuner would,
// compiled with bounds checks and run against float64 reference loops: the
// blocked conv (conv2d_nchwc between layout_transforms) with pixels that are
// not whole tiles, a ragged last vector (100 channels), input channels that
// are not whole blocks, batch 1 and 3, one and two threads, short and long
// reductions with and without K blocks; and the same tiles under channel
// lanes (an NCHW conv) and flat tiles (a dense layer).
#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/driver/compile.h"
#include "compiler/lower/schedule_override.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "runtime/thread_pool.h"
#include "tests/test_util/blocked_conv_graph.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/model_manager_test.h"
#include "tests/test_util/reference_ops.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;

// A blocked conv's shape and the tile (and K blocks) the override forces.
struct WideCase : ::kiln::testing::BlockedConvShape {
  std::string tile;     // "3x112": the override's tile
  int64_t k_block = 0;  // the override's K block span; 0 for none
  int threads = 1;
  int64_t reduction() const { return c * k * k; }
};

void PrintTo(const WideCase& p, std::ostream* os) {
  *os << p.n << "x" << p.c << "x" << p.h << "x" << p.w << " -> " << p.o << ", " << p.k << "x" << p.k
      << "/" << p.stride << " pad " << p.pad << ", tile " << p.tile << " kblock " << p.k_block
      << ", " << p.threads << " threads";
}

// Compile options whose every contraction takes `text`'s override, with
// bounds-checked kernels (a wide tile's reads and stores past the operands
// fail the run instead of passing unseen).
CompileOptions ForcedTile(const std::string& text) {
  std::optional<lower::ScheduleOverride> o = lower::ParseScheduleOverride(text);
  EXPECT_TRUE(o.has_value()) << text;
  CompileOptions options;
  options.kernel_bounds_checks = true;
  options.disabled_passes = {"WinogradConv"};  // the direct conv's tiles
  options.schedule_overrides = [o](const std::string&) { return o; };
  return options;
}

class WideTileTest : public testing::ModelManagerTest<> {
 protected:
  // Compiles `g` with `options`, expects the contraction kernel's schedule to
  // contain `schedule` and K blocks as `k_blocks` says, runs it on `x` and
  // compares with `want`, each value to `tolerance` relative to max(1, |want|).
  void CompileRunCompare(Graph g, const CompileOptions& options, const std::vector<float>& x,
                         const std::vector<float>& want, const std::string& schedule,
                         double tolerance, bool k_blocks = false) {
    const TensorType type = g.inputs()[0]->type;
    auto r = manager_->Compile("m", std::move(g), options);
    ASSERT_TRUE(r.ok()) << r.status();
    bool found = false;
    for (const auto& k : r->kernels) {
      if (k.schedule.find("gemm") == std::string::npos) continue;
      found = true;
      EXPECT_NE(k.schedule.find(schedule), std::string::npos) << k.schedule;
      EXPECT_EQ(k.schedule.find("(K blocks)") != std::string::npos, k_blocks) << k.schedule;
    }
    EXPECT_TRUE(found) << "no kernel took the contraction schedule";
    auto input = Tensor::FromBytes(
        type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
    ASSERT_TRUE(input.ok());
    auto result = manager_->Find("m")->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const Tensor& out = result->outputs[0];
    ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
    const float* got = static_cast<const float*>(out.data());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
    }
  }
};

class WideTileBlockedConvTest : public WideTileTest,
                                public ::testing::WithParamInterface<WideCase> {};

// relu(conv + bias), the conv blocked: NCHW -> NCHW16c -> conv2d_nchwc ->
// relu -> NCHW, in the forced tile.
TEST_P(WideTileBlockedConvTest, MatchesReferenceConv) {
  const WideCase p = GetParam();
  runtime::SetParallelThreads(p.threads);
  auto x = Pseudorandom(p.n * p.c * p.h * p.w, 71);
  auto w = Pseudorandom(p.o * p.c * p.k * p.k, 72);
  auto bias = Pseudorandom(p.o, 73);
  Graph g = ::kiln::testing::BlockedConvReluGraph(p, w, bias);

  std::vector<float> want = kiln::testing::RefRelu(kiln::testing::RefConv2DStrided(
      x, w, bias, p.n, p.c, p.h, p.w, p.o, p.k, p.k, p.stride, p.pad));
  const std::string schedule = absl::StrCat("gemm ", p.tile, " M=");
  const std::string forced = absl::StrCat("tile=", p.tile, " kblock=", p.k_block);
  // Float sums in another order than the reference's: rounding grows with
  // the number of terms.
  const double tolerance = p.reduction() > 256 ? 1e-3 : 1e-4;
  CompileRunCompare(std::move(g), ForcedTile(forced), x, want, schedule, tolerance, p.k_block > 0);
}

INSTANTIATE_TEST_SUITE_P(
    FiveToSevenVectors, WideTileBlockedConvTest,
    ::testing::Values(
        WideCase{{1, 32, 7, 7, 80, 1, 1, 0}, "5x80"},           // 49 pixels: a ragged tile
        WideCase{{3, 32, 7, 9, 80, 1, 1, 0}, "4x80"},           // batch 3, 63 pixels each
        WideCase{{1, 48, 10, 10, 112, 1, 1, 0}, "3x112"},       // 100 pixels, one ragged tile
        WideCase{{1, 48, 9, 9, 112, 1, 1, 0}, "2x112"},         // 81 pixels
        WideCase{{1, 64, 7, 7, 96, 1, 1, 0}, "4x96"},           // 49 pixels
        WideCase{{3, 40, 6, 6, 100, 1, 1, 0}, "3x112"},         // ragged vector, C not whole
        WideCase{{3, 40, 6, 6, 100, 1, 1, 0}, "3x112", 0, 2},   // the same on two threads
        WideCase{{1, 32, 9, 9, 80, 3, 2, 1}, "5x80"},           // 3x3/2, padded
        WideCase{{1, 480, 7, 7, 112, 1, 1, 0}, "3x112"},        // K = 480, no K blocks
        WideCase{{1, 480, 7, 7, 112, 1, 1, 0}, "3x112", 5},     // K blocks of 5 channel blocks
        WideCase{{1, 96, 7, 7, 112, 3, 1, 1}, "3x112", 2},      // 3x3, K = 864 in 3 K blocks
        WideCase{{3, 96, 5, 5, 100, 3, 1, 1}, "3x112", 3, 2}),  // batch 3, K blocks, 2 threads
    [](const ::testing::TestParamInfo<WideCase>& info) {
      const WideCase& p = info.param;
      std::string tile = p.tile;
      std::replace(tile.begin(), tile.end(), 'x', '_');
      return absl::StrCat("n", p.n, "c", p.c, "o", p.o, "k", p.k, "s", p.stride, "tile", tile, "kb",
                          p.k_block, "t", p.threads);
    });

// An NCHW conv over 7x7 outputs in channel lanes: rows of the tile are
// pixels, its seven vectors 112 output channels (100 real), stored through
// the transposed store one vector of 16 channels at a time.
TEST_F(WideTileTest, ChannelLanesConvInSevenVectors) {
  const int64_t n = 2, c = 24, h = 7, o = 100;
  auto x = Pseudorandom(n * c * h * h, 81), w = Pseudorandom(o * c * 9, 82);
  auto bias = Pseudorandom(o, 83);
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
  Conv2DAttrs a;
  a.strides = {1, 1};
  a.padding = {1, 1, 1, 1};
  Node* conv = Op(g, "conv2d",
                  {in, g.AddConstant("w", FloatValues({o, c, 3, 3}, w)),
                   g.AddConstant("b", FloatValues({o}, bias))},
                  a);
  g.AddOutput(Op(g, "relu", {conv}));
  std::vector<float> want = kiln::testing::RefRelu(
      kiln::testing::RefConv2DStrided(x, w, bias, n, c, h, h, o, 3, 3, 1, 1));
  CompileRunCompare(std::move(g), ForcedTile("layout=lanes tile=3x112"), x, want,
                    "gemm 3x112 M=98 N=100", 1e-4);
}

// relu(dense + bias) in flat tiles of 2x112 over 13 rows (a ragged tile)
// and 100 columns (a ragged last vector), and of 5x80 over 160 columns.
TEST_F(WideTileTest, DenseInWideFlatTiles) {
  for (const auto& [tile, n] : {std::pair<std::string, int64_t>{"2x112", 100}, {"5x80", 160}}) {
    SCOPED_TRACE(tile);
    const int64_t m = 13, k = 70;
    auto x = Pseudorandom(m * k, 91), w = Pseudorandom(n * k, 92);
    auto bias = Pseudorandom(n, 93);
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    Node* y = Op(g, "dense",
                 {in, g.AddConstant("w", FloatValues({n, k}, w)),
                  g.AddConstant("b", FloatValues({n}, bias))});
    g.AddOutput(Op(g, "relu", {y}));
    std::vector<float> want = kiln::testing::RefRelu(kiln::testing::RefDense(x, w, bias, m, k, n));
    CompileRunCompare(std::move(g), ForcedTile(absl::StrCat("layout=flat tile=", tile)), x, want,
                      absl::StrCat("gemm ", tile, " M=13"), 1e-4);
  }
}

}  // namespace
}  // namespace kiln
