// Winograd's F(2x2, 3x3), F(3x3, 3x3) and F(4x4, 3x3)
// (lower/winograd_conv.cc), end to end: a blocked
// conv2d_nchwc -> [+ skip] -> relu between layout_transforms, compiled (so
// WinogradConv rewrites the conv) with bounds-checked kernels, run,
// and compared with float64 reference loops. Shapes cover whole and ragged
// tiles (outputs 8, 10, 14, 7, 11x13), padding 0, 1 and 2, channels that
// are not whole blocks, batch 3, two threads, a residual add and a fused
// BN + ReLU prologue, each under both algorithms; and a tuning record
// applied to the Winograd GEMMs. The error is held to a
// bound relative to each output's sum of |x| |w| (the transforms scale and
// cancel, so Winograd rounds more than the direct sum, F(4x4, 3x3) most).
#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

using engine::ModelManager;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;

// |got - want| <= bound * sum over the window of |x| |w| (+ |bias|), per
// algorithm. These cases show up to 2.8e-6 under F(4x4, 3x3) (the most with
// padding 2, where zeros make the window's sum small against the tile's),
// 7.4e-7 under F(3x3, 3x3) and 1.2e-7 under F(2x2, 3x3); float32's epsilon
// is 1.2e-7. A wrong coefficient or index is off by ~0.1.
double ErrorBound(int tile) { return tile == 4 ? 1e-5 : tile == 3 ? 3e-6 : 1e-6; }
constexpr int64_t kBlock = ::kiln::testing::kChannelBlock;

struct WinogradCase {
  int64_t n, c, h, w, o, pad;
  int tile = 0;  // set by the suite: 2, 3 or 4
  int threads = 1;
  bool residual = false;  // relu(conv + bias + skip)
  bool prologue = false;  // conv(relu(x * s + t)): a fused BN + ReLU
};

void PrintTo(const WinogradCase& p, std::ostream* os) {
  *os << "F" << p.tile << " " << p.n << "x" << p.c << "x" << p.h << "x" << p.w << " -> " << p.o
      << " pad " << p.pad << ", " << p.threads << " threads" << (p.residual ? ", residual" : "")
      << (p.prologue ? ", prologue" : "");
}

using WinogradConvTest =
    testing::ModelManagerTest<::testing::TestWithParam<std::tuple<int, WinogradCase>>>;

std::vector<float> Abs(std::vector<float> v) {
  for (float& f : v) f = std::fabs(f);
  return v;
}

// Expects `out` within F(tile x tile)'s bound of `want`, element by element
// (ErrorBound times `magnitude`); returns the largest error over magnitude.
double ExpectWithinBound(const Tensor& out, const std::vector<float>& want,
                         const std::vector<float>& magnitude, int tile) {
  EXPECT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
  if (out.type().NumElements() != static_cast<int64_t>(want.size())) return 0;
  const float* got = static_cast<const float*>(out.data());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(double{got[i]} - want[i]);
    if (error > ErrorBound(tile) * magnitude[i]) {
      ADD_FAILURE() << "at " << i << ": got " << got[i] << ", want " << want[i];
      return error / magnitude[i];
    }
    worst = std::max(worst, error / magnitude[i]);
  }
  return worst;
}

TEST_P(WinogradConvTest, MatchesReferenceConv) {
  WinogradCase p = std::get<1>(GetParam());
  p.tile = std::get<0>(GetParam());
  SCOPED_TRACE(::testing::PrintToString(p));
  runtime::SetParallelThreads(p.threads);
  const int64_t oh = p.h + 2 * p.pad - 2, ow = p.w + 2 * p.pad - 2;
  const std::vector<float> x = Pseudorandom(p.n * p.c * p.h * p.w, 31);
  const std::vector<float> w = Pseudorandom(p.o * p.c * 9, 32);
  const std::vector<float> bias = Pseudorandom(p.o, 33);
  const std::vector<float> skip = Pseudorandom(p.n * p.o * oh * ow, 34);
  const std::vector<float> scale = Pseudorandom(p.c, 35), shift = Pseudorandom(p.c, 36);

  // NCHW in, the conv blocked as ConvertLayoutNchwc writes it (so that
  // WinogradConv sees conv2d_nchwc), the skip blocked too, NCHW out.
  const int64_t cb = (p.c + kBlock - 1) / kBlock, ob = (p.o + kBlock - 1) / kBlock;
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {p.n, p.c, p.h, p.w}});
  Node* conv_input = in;
  std::vector<float> activation = x;  // what the conv reads
  if (p.prologue) {
    Node* s = g.AddConstant("s", FloatValues({1, p.c, 1, 1}, scale));
    Node* t = g.AddConstant("t", FloatValues({1, p.c, 1, 1}, shift));
    conv_input = Op(g, "relu", {Op(g, "add", {Op(g, "mul", {in, s}), t})});
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
      const int64_t ch = i / (p.h * p.w) % p.c;
      activation[i] = std::max(0.0f, x[i] * scale[ch] + shift[ch]);
    }
  }
  Conv2DAttrs a;
  a.padding = {p.pad, p.pad, p.pad, p.pad};
  const ::kiln::testing::BlockedConvShape shape{p.n, p.c, p.h, p.w, p.o, 3, 1, p.pad};
  std::vector<float> blocked_bias(ob * kBlock, 0.0f);
  std::copy(bias.begin(), bias.end(), blocked_bias.begin());
  Node* value =
      Op(g, "conv2d_nchwc",
         {Op(g, "layout_transform", {conv_input}, LayoutTransformAttrs{0, kBlock, 0}),
          g.AddConstant("w", FloatValues({ob, cb, 3, 3, kBlock, kBlock},
                                         ::kiln::testing::PackBlockedConvWeight(w, shape))),
          g.AddConstant("b", FloatValues({ob, kBlock}, blocked_bias))},
         a);
  std::vector<Tensor> inputs;
  auto tensor = [](const std::vector<int64_t>& shape, const std::vector<float>& v) {
    auto t =
        Tensor::FromBytes({DType::kFloat32, shape},
                          absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    EXPECT_TRUE(t.ok()) << t.status();
    return *std::move(t);
  };
  inputs.push_back(tensor({p.n, p.c, p.h, p.w}, x));
  if (p.residual) {
    Node* s = g.AddInput("skip", {DType::kFloat32, {p.n, p.o, oh, ow}});
    value =
        Op(g, "add", {value, Op(g, "layout_transform", {s}, LayoutTransformAttrs{0, kBlock, 0})});
    inputs.push_back(tensor({p.n, p.o, oh, ow}, skip));
  }
  g.AddOutput(
      Op(g, "layout_transform", {Op(g, "relu", {value})}, LayoutTransformAttrs{kBlock, 0, p.o}));

  CompileOptions options;
  options.kernel_bounds_checks = true;
  options.winograd_tile = p.tile;
  auto r = manager_->Compile("m", std::move(g), options);
  ASSERT_TRUE(r.ok()) << r.status();
  bool winograd = false;
  for (const auto& k : r->kernels) {
    const std::string op = absl::StrCat("conv2d_nchwc_winograd_f", p.tile);
    if (std::find(k.ops.begin(), k.ops.end(), op) == k.ops.end()) continue;
    winograd = true;
    EXPECT_NE(k.schedule.find(absl::StrCat("winograd F(", p.tile, "x", p.tile, ",3x3), gemm")),
              std::string::npos)
        << k.schedule;
    if (p.residual) EXPECT_NE(std::find(k.ops.begin(), k.ops.end(), "add"), k.ops.end());
    if (p.prologue) EXPECT_NE(std::find(k.ops.begin(), k.ops.end(), "mul"), k.ops.end());
  }
  ASSERT_TRUE(winograd) << "WinogradConv should have taken the conv";

  std::vector<const Tensor*> args;
  for (const Tensor& t : inputs) args.push_back(&t);
  auto result = manager_->Find("m")->Run(args);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<float> want =
      kiln::testing::RefConv2DStrided(activation, w, bias, p.n, p.c, p.h, p.w, p.o, 3, 3, 1, p.pad);
  std::vector<float> magnitude = kiln::testing::RefConv2DStrided(
      Abs(activation), Abs(w), Abs(bias), p.n, p.c, p.h, p.w, p.o, 3, 3, 1, p.pad);
  if (p.residual) {
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += skip[i];
      magnitude[i] += std::fabs(skip[i]);
    }
  }
  want = kiln::testing::RefRelu(want);
  const double worst = ExpectWithinBound(result->outputs[0], want, magnitude, p.tile);
  RecordProperty("worst_relative_error", absl::StrFormat("%.3g", worst));
}

// A tuning record for a Winograd group plans its GEMMs: a forced 2x64 tile
// shows in the schedule and the values stay right.
TEST(WinogradTunedTest, ARecordPlansTheGemms) {
  const int64_t n = 1, c = 32, h = 12, w = 12, o = 64;
  const std::vector<float> x = Pseudorandom(n * c * h * w, 41);
  const std::vector<float> wt = Pseudorandom(o * c * 9, 42);
  const std::vector<float> bias = Pseudorandom(o, 43);
  const ::kiln::testing::BlockedConvShape shape{n, c, h, w, o, 3, 1, 1};
  Graph g = ::kiln::testing::BlockedConvReluGraph(shape, wt, bias);
  std::optional<lower::ScheduleOverride> record =
      lower::ParseScheduleOverride("tile=2x64 kblock=0");
  ASSERT_TRUE(record.has_value());
  CompileOptions options;
  options.kernel_bounds_checks = true;
  options.schedule_overrides = [record](const std::string&) { return record; };
  auto manager = ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto r = (*manager)->Compile("m", std::move(g), options);
  ASSERT_TRUE(r.ok()) << r.status();
  bool tuned = false;
  for (const auto& k : r->kernels) {
    if (k.schedule.find("winograd F(2x2,3x3), gemm 2x64 ") != std::string::npos) tuned = true;
  }
  EXPECT_TRUE(tuned) << "no Winograd kernel took the record's tile";
  auto input =
      Tensor::FromBytes({DType::kFloat32, {n, c, h, w}},
                        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("m")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<float> want = kiln::testing::RefRelu(
      kiln::testing::RefConv2DStrided(x, wt, bias, n, c, h, w, o, 3, 3, 1, 1));
  const std::vector<float> magnitude =
      kiln::testing::RefConv2DStrided(Abs(x), Abs(wt), Abs(bias), n, c, h, w, o, 3, 3, 1, 1);
  ExpectWithinBound(result->outputs[0], want, magnitude, 2);
}

INSTANTIATE_TEST_SUITE_P(
    TilesAndEdges, WinogradConvTest,
    ::testing::Combine(
        ::testing::Values(2, 3, 4),
        ::testing::Values(WinogradCase{1, 16, 8, 8, 16, 1},       // 2x2 whole tiles
                          WinogradCase{1, 16, 12, 12, 32, 0},     // no padding: 10x10, ragged
                          WinogradCase{1, 16, 6, 6, 16, 2},       // pad 2: tiles mostly outside
                          WinogradCase{1, 64, 14, 14, 64, 1},     // 14x14: ragged last tiles
                          WinogradCase{1, 20, 11, 13, 40, 1},     // C, O not whole blocks
                          WinogradCase{1, 32, 7, 7, 48, 1},       // 7x7
                          WinogradCase{3, 32, 9, 10, 32, 1},      // batch 3
                          WinogradCase{2, 48, 28, 28, 64, 1, 2},  // two threads
                          WinogradCase{1, 64, 56, 56, 64, 1},     // F(2x2): planes 49 x 4 KB
                          WinogradCase{1, 32, 16, 16, 32, 1, 1, true},  // residual add
                          WinogradCase{2, 24, 10, 10, 32, 1, 2, true},  // residual, two threads
                          WinogradCase{1, 32, 12, 12, 32, 1, 1, false,
                                       true})));  // BN + ReLU prologue

}  // namespace
}  // namespace kiln
