// The packed, register-tiled contraction schedule against plain reference
// loops, at sizes chosen to hit its edges: M and N that are not whole tiles
// (masked stores, zero-padded panels), a single row (GEMV), conv padding with
// the padded-row domain, stride 2 (phase-split input), batch > 1, and fused
// epilogues reading other tensors under the lane mask.
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/driver/compile.h"
#include "compiler/lower/loop_ir.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/thread_pool.h"
#include "runtime/workspace_pool.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/index_values.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::lower {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using ::testing::HasSubstr;
using ::testing::Not;
using engine::ModelManager;
using runtime::Tensor;
using runtime::KernelWorkspacePool;
using runtime::WorkspacePool;

class ContractionScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // The program's first kernel, or an empty one when compiling fails.
  static KernelSpec FirstKernelOf(Graph graph, const CompileOptions& options = {}) {
    auto program = CompileGraph(std::move(graph), options);
    EXPECT_TRUE(program.ok()) << program.status();
    if (!program.ok() || program->kernels.empty()) return {};
    return program->kernels[0];
  }

  static std::string ScheduleOf(Graph graph) { return FirstKernelOf(std::move(graph)).schedule; }

  // The names of the first kernel's temporaries.
  static std::vector<std::string> TempsOf(Graph graph) {
    const lower::LoopFunction fn = FirstKernelOf(std::move(graph)).function;
    std::vector<std::string> names;
    for (size_t i = fn.num_params; i < fn.buffers.size(); ++i) names.push_back(fn.buffers[i].name);
    return names;
  }

  std::vector<float> Run(Graph graph, const std::vector<float>& x,
                         const CompileOptions& options = {}) {
    const TensorType type = graph.inputs()[0]->type;
    auto r = manager_->Compile("m", std::move(graph), options);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    auto input = Tensor::FromBytes(
        type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
    EXPECT_TRUE(input.ok());
    auto result = manager_->Find("m")->Run({&*input});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    const Tensor& out = result->outputs[0];
    const float* p = static_cast<const float*>(out.data());
    return std::vector<float>(p, p + out.type().NumElements());
  }

  // Checks the schedule applies (its summary containing `schedule`) and the
  // result matches `want`.
  void Check(const std::function<Graph()>& build, const std::vector<float>& x,
             const std::vector<float>& want, const std::string& schedule = "gemm",
             double tolerance = 1e-4, const CompileOptions& options = {}) {
    EXPECT_THAT(FirstKernelOf(build(), options).schedule, HasSubstr(schedule));
    std::vector<float> got = Run(build(), x, options);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0, std::fabs(double(want[i]))))
          << "at " << i;
    }
  }

  std::unique_ptr<ModelManager> manager_;
};

std::vector<float> Relu(std::vector<float> v) { return kiln::testing::RefRelu(std::move(v)); }

// Options planning tiles as on an Intel Xeon (a cycle per operand load,
// ContractionKnobs::operand_load_cycles), whatever the host: the cases that
// use them are sized for the panels and tile counts of those tiles.
CompileOptions XeonTiles() {
  CompileOptions options;
  options.operand_load_cycles = 1;
  return options;
}

// conv2d of `in` with constant weights of `w_shape` (OIHW), the bias when
// given, square stride and symmetric padding.
Node* AddConv(Graph& g, Node* in, const std::vector<float>& w, std::vector<int64_t> w_shape,
              const std::vector<float>& bias, int64_t stride, int64_t pad, int64_t groups = 1) {
  Conv2DAttrs attrs;
  attrs.strides = {stride, stride};
  attrs.padding = {pad, pad, pad, pad};
  attrs.groups = groups;
  std::vector<Node*> inputs{in, g.AddConstant("w", FloatValues(std::move(w_shape), w))};
  if (!bias.empty()) {
    inputs.push_back(g.AddConstant("b", FloatValues({static_cast<int64_t>(bias.size())}, bias)));
  }
  return Op(g, "conv2d", inputs, attrs);
}

// A graph, its input and the reference output.
struct ContractionCase {
  std::vector<float> x;
  std::function<Graph()> build;
  std::vector<float> want;
};

// relu(dense(x, w) + bias) with x of m x k and w of n x k.
ContractionCase MakeDenseBiasReluCase(int64_t m, int64_t k, int64_t n, int seed) {
  auto x = Pseudorandom(m * k, seed), w = Pseudorandom(n * k, seed + 1);
  auto bias = Pseudorandom(n, seed + 2);
  auto build = [=] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    Node* y = Op(g, "dense", {in, g.AddConstant("w", FloatValues({n, k}, w)),
                              g.AddConstant("b", FloatValues({n}, bias))});
    g.AddOutput(Op(g, "relu", {y}));
    return g;
  };
  return {x, build, Relu(kiln::testing::RefDense(x, w, bias, m, k, n))};
}

// A 3x3, stride-1, pad-1 conv with bias (n x c x h x h in, o channels out),
// then + residual and relu in the epilogue.
ContractionCase MakeConvResidualCase(int64_t n, int64_t c, int64_t h, int64_t o, int seed) {
  auto x = Pseudorandom(n * c * h * h, seed), w = Pseudorandom(o * c * 9, seed + 1);
  auto bias = Pseudorandom(o, seed + 2), residual = Pseudorandom(n * o * h * h, seed + 3);
  auto build = [=] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    Node* y = AddConv(g, in, w, {o, c, 3, 3}, bias, 1, 1);
    y = Op(g, "add", {y, g.AddConstant("r", FloatValues({n, o, h, h}, residual))});
    g.AddOutput(Op(g, "relu", {y}));
    return g;
  };
  auto want = kiln::testing::RefConv2DStrided(x, w, bias, n, c, h, h, o, 3, 3, 1, 1);
  for (size_t i = 0; i < want.size(); ++i) want[i] += residual[i];
  return {x, build, Relu(want)};
}

TEST_F(ContractionScheduleTest, DenseSingleRowWithBiasAndRelu) {
  ContractionCase dense = MakeDenseBiasReluCase(1, 300, 70, 1);
  Check(dense.build, dense.x, dense.want);
}

// A head merge (transpose + reshape) fused into the dense that consumes it:
// the A operand is packed through the producers' index, whose divisions the
// index simplifier removes. Reference: the transpose done by hand.
TEST_F(ContractionScheduleTest, DenseReadsItsOperandThroughAFusedTranspose) {
  const int64_t heads = 4, seq = 16, d = 32, n = 48;
  auto x = Pseudorandom(heads * seq * d, 40), w = Pseudorandom(n * heads * d, 41);
  auto bias = Pseudorandom(n, 42);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {heads, seq, d}});
    Node* t = Op(g, "transpose", {in}, TransposeAttrs{{1, 0, 2}});
    Node* r = Op(g, "reshape", {t}, ReshapeAttrs{{seq, heads * d}});
    Node* y = Op(g, "dense", {r, g.AddConstant("w", FloatValues({n, heads * d}, w)),
                              g.AddConstant("b", FloatValues({n}, bias))});
    g.AddOutput(Op(g, "relu", {y}));
    return g;
  };
  std::vector<float> merged(seq * heads * d);
  for (int64_t s = 0; s < seq; ++s) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d; ++i) merged[(s * heads + h) * d + i] = x[(h * seq + s) * d + i];
    }
  }
  Check(build, x, Relu(kiln::testing::RefDense(merged, w, bias, seq, heads * d, n)));
}

TEST_F(ContractionScheduleTest, DenseWithRowAndColumnTails) {
  const int64_t m = 13, k = 100, n = 50;
  auto x = Pseudorandom(m * k, 4), w = Pseudorandom(n * k, 5), bias = Pseudorandom(n, 6);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(Op(g, "dense", {in, g.AddConstant("w", FloatValues({n, k}, w)),
                                g.AddConstant("b", FloatValues({n}, bias))}));
    return g;
  };
  // The activation rows stream along K, so they are read in place (the tail
  // tile's extra rows reread row 12) rather than packed per call.
  EXPECT_THAT(TempsOf(build()), Not(::testing::Contains("a_panel")));
  Check(build, x, kiln::testing::RefDense(x, w, bias, m, k, n));
}

// A transposed activation steps by M elements along K: read in place, each
// broadcast would touch a new cache line, so it is packed per call.
TEST_F(ContractionScheduleTest, MatmulOverTransposedActivationPacksIt) {
  const int64_t m = 30, k = 70, n = 40;
  auto x_km = Pseudorandom(k * m, 60), w_kn = Pseudorandom(k * n, 61);
  std::vector<float> x_mk(m * k), w_nk(n * k);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < m; ++j) x_mk[j * k + i] = x_km[i * m + j];
    for (int64_t j = 0; j < n; ++j) w_nk[j * k + i] = w_kn[i * n + j];
  }
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {k, m}});
    Node* t = Op(g, "transpose", {in}, TransposeAttrs{{1, 0}});
    g.AddOutput(Op(g, "matmul", {t, g.AddConstant("w", FloatValues({k, n}, w_kn))}));
    return g;
  };
  EXPECT_THAT(TempsOf(build()), ::testing::Contains("a_panel"));
  Check(build, x_km, kiln::testing::RefDense(x_mk, w_nk, {}, m, k, n));
}

TEST_F(ContractionScheduleTest, MatmulWithWeightsAsKByN) {
  const int64_t m = 20, k = 33, n = 40;
  auto x = Pseudorandom(m * k, 7), w_kn = Pseudorandom(k * n, 8);
  // The reference takes (N, K) weights.
  std::vector<float> w_nk(n * k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) w_nk[j * k + i] = w_kn[i * n + j];
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(Op(g, "matmul", {in, g.AddConstant("w", FloatValues({k, n}, w_kn))}));
    return g;
  };
  Check(build, x, kiln::testing::RefDense(x, w_nk, {}, m, k, n));
}

// conv 3x3, stride 1, pad 1, batch 2, 11 output channels (not a whole tile),
// 9x9 image (padded rows 11 wide: 2 masked columns per row), then + residual
// and relu in the epilogue.
TEST_F(ContractionScheduleTest, PaddedConvWithResidualEpilogue) {
  ContractionCase conv = MakeConvResidualCase(2, 5, 9, 11, 9);
  Check(conv.build, conv.x, conv.want);
}

// Ap (M x K = 1024 x 2100 floats, 8.6 MB) in 7 K blocks of 300 (forced by
// a schedule override: the estimate takes K blocks only past 32 MB of A),
// with partial sums between them; bias and relu apply once, after the last
// block. N is not a whole tile. Column and row blocks go in cache groups,
// so a tile's K blocks are interleaved with other tiles'.
TEST_F(ContractionScheduleTest, DenseInKBlocksAppliesEpilogueOnce) {
  ContractionCase dense = MakeDenseBiasReluCase(1024, 2100, 520, 50);
  CompileOptions options;
  options.schedule_overrides = [](const std::string&) -> std::optional<lower::ScheduleOverride> {
    lower::ScheduleOverride o;
    o.k_block_span = 300;
    return o;
  };
  EXPECT_THAT(ScheduleOf(dense.build()), Not(HasSubstr("K blocks")));
  // 2100 float products per output, summed in another order than the
  // reference's: rounding grows with the sum of |terms|, not |sum|.
  Check(dense.build, dense.x, dense.want, "(K blocks) (cache groups", /*tolerance=*/1e-3,
        options);
}

// A 3x3 conv over 1024 channels (K = 9216) in K blocks of whole channels
// (the window offsets stay inside a block), batch 8, with a residual add and
// relu in the epilogue. Its 6x6 outputs fill tiles poorly, so it runs in
// channel lanes, whose weight panel the K blocks split.
TEST_F(ContractionScheduleTest, ConvInKBlocksWithResidualEpilogue) {
  ContractionCase conv = MakeConvResidualCase(8, 1024, 6, 256, 53);
  // 9216 float products per output: see the dense case on tolerance.
  Check(conv.build, conv.x, conv.want, "(K blocks)", /*tolerance=*/1e-3);
}

// With many input channels (K = 576) the tiles run over the flattened padded
// rows, and the epilogue stores through per-lane row digits.
TEST_F(ContractionScheduleTest, PaddedConvWithLongReductionTilesFlattenedRows) {
  const int64_t c = 64, h = 10, o = 16;
  auto x = Pseudorandom(c * h * h, 23), w = Pseudorandom(o * c * 9, 24);
  auto bias = Pseudorandom(o, 25);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, h}});
    g.AddOutput(AddConv(g, in, w, {o, c, 3, 3}, bias, 1, 1));
    return g;
  };
  EXPECT_THAT(ScheduleOf(build()), Not(HasSubstr("row tiles")));
  Check(build, x, kiln::testing::RefConv2DStrided(x, w, bias, 1, c, h, h, o, 3, 3, 1, 1));
}

// The padded input is a kernel temporary: a second call takes the block the
// first gave back (stale contents and all) and still computes the same conv.
TEST_F(ContractionScheduleTest, SecondCallReusesThePaddedInputBlock) {
  const int64_t c = 8, h = 30, o = 16;
  auto x = Pseudorandom(c * h * h, 40), w = Pseudorandom(o * c * 9, 41);
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, h}});
  g.AddOutput(AddConv(g, in, w, {o, c, 3, 3}, {}, 2, 1));
  const std::vector<float> want =
      kiln::testing::RefConv2DStrided(x, w, {}, 1, c, h, h, o, 3, 3, 2, 1);
  std::vector<float> first = Run(std::move(g), x);
  const WorkspacePool::Stats before = KernelWorkspacePool().stats();
  auto input = Tensor::FromBytes({DType::kFloat32, {1, c, h, h}},
                                 absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                   x.size() * 4));
  ASSERT_TRUE(input.ok());
  auto second = manager_->Find("m")->Run({&*input});
  ASSERT_TRUE(second.ok()) << second.status();
  const WorkspacePool::Stats after = KernelWorkspacePool().stats();
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_GT(after.reuses, before.reuses);
  const float* got = static_cast<const float*>(second->outputs[0].data());
  ASSERT_EQ(first.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(first[i], want[i], 1e-4 * std::max(1.0, std::fabs(double(want[i])))) << i;
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(double(want[i])))) << i;
  }
}

TEST_F(ContractionScheduleTest, StrideTwoConvReadsInputPhases) {
  const int64_t c = 4, h = 15, o = 24;
  auto x = Pseudorandom(c * h * h, 13), w = Pseudorandom(o * c * 9, 14);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, h}});
    g.AddOutput(AddConv(g, in, w, {o, c, 3, 3}, {}, 2, 1));
    return g;
  };
  Check(build, x, kiln::testing::RefConv2DStrided(x, w, {}, 1, c, h, h, o, 3, 3, 2, 1));
}

// Stride 3: each phase fill splits rows and columns into zero rows, copied
// interiors and select borders; on a 3-wide input no column is wholly inside.
TEST_F(ContractionScheduleTest, StrideThreeConvFillsPhasesAtEverySize) {
  for (const auto& [h, wd] : {std::pair<int64_t, int64_t>{17, 17}, {40, 3}}) {
    const int64_t c = 6, o = 20;
    auto x = Pseudorandom(c * h * wd, 30 + h), w = Pseudorandom(o * c * 9, 31);
    auto build = [&] {
      Graph g;
      Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, wd}});
      g.AddOutput(AddConv(g, in, w, {o, c, 3, 3}, {}, 3, 2));
      return g;
    };
    SCOPED_TRACE(wd);
    Check(build, x, kiln::testing::RefConv2DStrided(x, w, {}, 1, c, h, wd, o, 3, 3, 3, 2));
  }
}

// A 1x1 conv without padding reads its input as it is, with no padded copy.
// The cases: pixels that whole tiles cover (read in place), pixels that
// leave a tail in the last tile (packed per call, with masked loads past the
// input's end), and few pixels with many channels (channel lanes
// broadcasting from the input); at stride 2, every other pixel, packed by
// the usual tiling and broadcast by channel lanes; each at batch 1 and 2.
TEST_F(ContractionScheduleTest, PointwiseConvReadsItsInputWithoutACopy) {
  struct Case {
    int64_t c, h, o, stride;
    std::string schedule;
    bool packs_input;
  };
  for (const Case& k :
       {Case{16, 16, 24, 1, "gemm", false}, Case{16, 10, 24, 1, "gemm", true},
        Case{160, 7, 96, 1, "(channel lanes)", false}, Case{16, 16, 24, 2, "gemm", true},
        Case{160, 14, 96, 2, "(channel lanes)", false}}) {
    for (int64_t n : {1, 2}) {
      auto x = Pseudorandom(n * k.c * k.h * k.h, 15), w = Pseudorandom(k.o * k.c, 16);
      auto bias = Pseudorandom(k.o, 17);
      auto build = [&] {
        Graph g;
        Node* in = g.AddInput("x", {DType::kFloat32, {n, k.c, k.h, k.h}});
        g.AddOutput(Op(g, "relu", {AddConv(g, in, w, {k.o, k.c, 1, 1}, bias, k.stride, 0)}));
        return g;
      };
      SCOPED_TRACE(absl::StrCat("c=", k.c, " h=", k.h, " o=", k.o, " stride=", k.stride, " n=", n));
      const std::vector<std::string> temps = TempsOf(build());
      EXPECT_THAT(temps, Not(::testing::Contains("padded_input")));
      EXPECT_EQ(absl::c_linear_search(temps, "b_panel"), k.packs_input);
      Check(build, x,
            Relu(kiln::testing::RefConv2DStrided(x, w, bias, n, k.c, k.h, k.h, k.o, 1, 1, k.stride,
                                                 0)),
            k.schedule);
    }
  }
}

// Depthwise (groups = channels): each output channel is a batch of its own
// with M = 1 and K = the 3x3 window, read in place from a padded copy of its
// input channel, made just before that channel's rows (FillPerChannel). Two
// images and stride 2 too: the plane is then an image's channel, split in
// phases (and wide enough that rows get tiles of their own). Prefetches
// change no value, so the check against the reference covers them too.
TEST_F(ContractionScheduleTest, DepthwiseConvReadsPaddedInputPerChannel) {
  for (const auto& [n, stride] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {2, 2}}) {
    const int64_t c = 16, h = stride == 1 ? 24 : 56;
    auto x = Pseudorandom(n * c * h * h, 17), w = Pseudorandom(c * 9, 18);
    auto bias = Pseudorandom(c, 19);
    auto build = [&, n = n, stride = stride] {
      Graph g;
      Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
      g.AddOutput(AddConv(g, in, w, {c, 1, 3, 3}, bias, stride, 1, /*groups=*/c));
      return g;
    };
    // Reference: one single-channel convolution per image and channel.
    std::vector<float> want;
    for (int64_t ch = 0; ch < n * c; ++ch) {
      std::vector<float> xc(x.begin() + ch * h * h, x.begin() + (ch + 1) * h * h);
      std::vector<float> wc(w.begin() + ch % c * 9, w.begin() + (ch % c + 1) * 9);
      auto y = kiln::testing::RefConv2DStrided(xc, wc, {bias[ch % c]}, 1, 1, h, h, 1, 3, 3,
                                               stride, 1);
      want.insert(want.end(), y.begin(), y.end());
    }
    SCOPED_TRACE(absl::StrCat("n=", n, " stride=", stride));
    Check(build, x, want, "(row tiles)");
    EXPECT_THAT(ScheduleOf(build()), HasSubstr("(padded per channel)"));
    // The 56 x 56 planes are prefetched one ahead while rows run; 24 x 24
    // planes are not.
    const std::string nest = lower::LoopFunctionToString(FirstKernelOf(build()).function);
    if (h == 56) {
      EXPECT_THAT(nest, HasSubstr("prefetch"));
    } else {
      EXPECT_THAT(nest, Not(HasSubstr("prefetch")));
    }
  }
}

// A depthwise conv's output rows in batch rows: 13 rows of 13 pixels take
// blocks of 7 rows, so the last block recomputes row 12 and must store only
// real rows. The residual add in the epilogue reads the output's positions:
// a row stored twice, or one dropped, would show.
TEST_F(ContractionScheduleTest, DepthwiseBatchRowsWithARaggedLastBlock) {
  const int64_t n = 2, c = 8, h = 13;
  auto x = Pseudorandom(n * c * h * h, 31), w = Pseudorandom(c * 9, 32);
  auto bias = Pseudorandom(c, 33), residual = Pseudorandom(n * c * h * h, 34);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    Node* y = AddConv(g, in, w, {c, 1, 3, 3}, bias, 1, 1, /*groups=*/c);
    y = Op(g, "add", {y, g.AddConstant("r", FloatValues({n, c, h, h}, residual))});
    g.AddOutput(Op(g, "relu", {y}));
    return g;
  };
  std::vector<float> want;
  for (int64_t ch = 0; ch < n * c; ++ch) {
    std::vector<float> xc(x.begin() + ch * h * h, x.begin() + (ch + 1) * h * h);
    std::vector<float> wc(w.begin() + ch % c * 9, w.begin() + (ch % c + 1) * 9);
    auto y = kiln::testing::RefConv2DStrided(xc, wc, {bias[ch % c]}, 1, 1, h, h, 1, 3, 3, 1, 1);
    want.insert(want.end(), y.begin(), y.end());
  }
  for (size_t i = 0; i < want.size(); ++i) want[i] += residual[i];
  Check(build, x, Relu(want), "(batch rows 7)");
}

// Few output pixels and many channels (ResNet's late convs, smaller): the
// tile's lanes run over output channels. Batch 2 joins the pixels (98 of
// them: 14 whole tiles of 7), 40 channels leave a masked tail, and the
// residual epilogue reads the output's layout across the lanes.
TEST_F(ContractionScheduleTest, FewPixelConvTilesOverChannelLanes) {
  ContractionCase conv = MakeConvResidualCase(2, 64, 7, 40, 60);
  Check(conv.build, conv.x, conv.want, "(channel lanes)");
}

// Channel lanes with a weight panel (K x NR = 1440 x 48 floats) too big to
// re-stream from L2 per row tile, so the reduction runs in K blocks. Two
// 11x11 images have 242 pixels, which no tile height above 2 divides: the
// last tile of pixel rows rereads the last pixel and stores only real rows.
TEST_F(ContractionScheduleTest, ChannelLanesInKBlocksWithPixelTail) {
  ContractionCase conv = MakeConvResidualCase(2, 160, 11, 48, 61);
  Check(conv.build, conv.x, conv.want, "(channel lanes) (K blocks)", /*tolerance=*/1e-3);
}

// A prefetch with the loops around it, outermost first.
struct PrefetchInLoops {
  Stmt prefetch;
  std::vector<te::Var> loops;
};
void CollectPrefetches(const Stmt& s, std::vector<te::Var>& loops,
                       std::vector<PrefetchInLoops>& out) {
  if (s->kind == StmtKind::kPrefetch) out.push_back({s, loops});
  if (s->kind == StmtKind::kFor) loops.push_back(s->var);
  for (const Stmt& c : s->children) CollectPrefetches(c, loops, out);
  if (s->kind == StmtKind::kFor) loops.pop_back();
}
// The prefetches under `body`.
std::vector<PrefetchInLoops> PrefetchesIn(const Stmt& body) {
  std::vector<te::Var> loops;
  std::vector<PrefetchInLoops> found;
  CollectPrefetches(body, loops, found);
  return found;
}

// The value of the loop named `name` at `point` of IndexValues' walk over
// `loops` (the innermost fastest), or `absent` when no loop has that name.
int64_t LoopValueAt(size_t point, const std::vector<te::Var>& loops, const std::string& name,
                    int64_t absent = -1) {
  int64_t rest = static_cast<int64_t>(point), value = absent;
  for (size_t i = loops.size(); i-- > 0;) {
    if (loops[i]->name == name) value = rest % loops[i]->extent;
    rest /= loops[i]->extent;
  }
  return value;
}

// With plain blocks, every pass over a K block's weight panel (one per row
// block of pixels) prefetches a share of the panel after it, so by the end
// of the K block each cache line of the next one was asked for, and no
// line of the current one: checked by evaluating every prefetch's index at
// every point of its loops, grouped by column block jb and K block kc.
TEST_F(ContractionScheduleTest, ChannelLanesPrefetchTheNextKBlocksPanel) {
  ContractionCase conv = MakeConvResidualCase(2, 160, 11, 48, 61);
  Check(conv.build, conv.x, conv.want, "(channel lanes) (K blocks)", /*tolerance=*/1e-3);
  const LoopFunction fn = FirstKernelOf(conv.build()).function;
  const std::vector<PrefetchInLoops> found = PrefetchesIn(fn.body);
  ASSERT_FALSE(found.empty()) << LoopFunctionToString(fn);
  const BufferDecl& panel = fn.buffers[found[0].prefetch->buffer];
  EXPECT_THAT(panel.name, ::testing::EndsWith(".packed"));
  int64_t column_blocks = 0, k_blocks = 0;
  for (const te::Var& v : found[0].loops) {
    if (v->name == "jb") column_blocks = v->extent;
    if (v->name == "kc") k_blocks = v->extent;
  }
  ASSERT_GT(column_blocks, 0);
  ASSERT_GT(k_blocks, 1);
  const int64_t block = panel.num_elements / (column_blocks * k_blocks);
  ASSERT_EQ(block % 16, 0);
  // Lines asked for per (jb, kc).
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> lines;
  for (const PrefetchInLoops& f : found) {
    EXPECT_EQ(f.prefetch->buffer, found[0].prefetch->buffer);
    const std::vector<int64_t> index = kiln::testing::IndexValues(f.prefetch->index, f.loops);
    for (size_t point = 0; point < index.size(); ++point) {
      const int64_t jb = LoopValueAt(point, f.loops, "jb", 0);
      const int64_t kc = LoopValueAt(point, f.loops, "kc", 0);
      lines[{jb, kc}].insert(index[point] / 16);
    }
  }
  for (int64_t jb = 0; jb < column_blocks; ++jb) {
    for (int64_t kc = 0; kc < k_blocks; ++kc) {
      const int64_t next = (jb * k_blocks + kc + 1) * block;
      const std::set<int64_t>& asked = lines[{jb, kc}];
      ASSERT_FALSE(asked.empty()) << "jb " << jb << " kc " << kc;
      EXPECT_GE(*asked.begin(), next / 16) << "a line of the current panel, jb " << jb;
      if (next >= panel.num_elements) continue;  // past the last panel: nothing to cover
      for (int64_t line = next / 16; line < (next + block) / 16; ++line) {
        ASSERT_TRUE(asked.count(line))
            << "line " << line << " not prefetched, jb " << jb << " kc " << kc;
      }
    }
  }
}

// One parallel loop over all tiles (no K blocks), column block by column
// block: the row tiles of column block jb together prefetch every line of
// jb + 1's weight panel (the transformer's and BERT's dense layers, whose
// first row tile read its panel from beyond L2). jb is the tile index over
// the row blocks (one pixel part).
TEST_F(ContractionScheduleTest, TilesInParallelPrefetchTheNextColumnBlocksPanel) {
  const int64_t m = 96, k = 256, n = 200;
  ContractionCase dense = MakeDenseBiasReluCase(m, k, n, 71);
  const KernelSpec spec = FirstKernelOf(dense.build());
  ASSERT_THAT(spec.schedule, HasSubstr("gemm"));
  ASSERT_THAT(spec.schedule, Not(HasSubstr("K blocks")));
  ASSERT_THAT(spec.schedule, Not(HasSubstr("A rows prefetched")));
  Check(dense.build, dense.x, dense.want);
  int mr = 0, nr = 0;
  ASSERT_EQ(std::sscanf(spec.schedule.c_str(), "gemm %dx%d", &mr, &nr), 2) << spec.schedule;
  const int64_t row_blocks = (m + mr - 1) / mr, column_blocks = (n + nr - 1) / nr;
  const std::vector<PrefetchInLoops> found = PrefetchesIn(spec.function.body);
  ASSERT_FALSE(found.empty()) << LoopFunctionToString(spec.function);
  const int64_t block = k * nr;                // one column block's panel, in elements
  std::map<int64_t, std::set<int64_t>> lines;  // by column block
  for (const PrefetchInLoops& f : found) {
    if (f.prefetch->into_l1) continue;  // the current panel's rows ahead (the next test)
    const std::vector<int64_t> index = kiln::testing::IndexValues(f.prefetch->index, f.loops);
    for (size_t point = 0; point < index.size(); ++point) {
      const int64_t tile = LoopValueAt(point, f.loops, "tile");
      ASSERT_GE(tile, 0) << LoopFunctionToString(spec.function);
      lines[tile / row_blocks].insert(index[point] / 16);
    }
  }
  for (int64_t jb = 0; jb + 1 < column_blocks; ++jb) {
    const int64_t next = (jb + 1) * block;
    const std::set<int64_t>& asked = lines[jb];
    ASSERT_FALSE(asked.empty()) << "jb " << jb;
    EXPECT_GE(*asked.begin(), next / 16) << "a line of the current panel, jb " << jb;
    // More tile steps than lines: none beyond the next panel either.
    EXPECT_LT(*asked.rbegin(), (next + block) / 16) << "a line past the next panel, jb " << jb;
    for (int64_t line = next / 16; line < (next + block) / 16; ++line) {
      ASSERT_TRUE(asked.count(line)) << "line " << line << " not prefetched, jb " << jb;
    }
  }
}

// A flat tile whose B panel outgrows L1 (K = 256 rows of NR floats) asks,
// at each k step, for the panel's row 16 steps ahead into L1: every line
// of it, and nothing else. A panel that fits L1 (K = 64) is left alone.
TEST_F(ContractionScheduleTest, FlatTilesPrefetchTheirPanelAheadIntoL1) {
  const int64_t m = 96, k = 256, n = 200;
  ContractionCase dense = MakeDenseBiasReluCase(m, k, n, 72);
  Check(dense.build, dense.x, dense.want, "gemm", 1e-4, XeonTiles());
  const KernelSpec spec = FirstKernelOf(dense.build(), XeonTiles());
  int mr = 0, nr = 0;
  ASSERT_EQ(std::sscanf(spec.schedule.c_str(), "gemm %dx%d", &mr, &nr), 2) << spec.schedule;
  const int64_t row_blocks = (m + mr - 1) / mr;
  const std::vector<PrefetchInLoops> found = PrefetchesIn(spec.function.body);
  int into_l1 = 0;
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> offsets;  // by (jb, k)
  for (const PrefetchInLoops& f : found) {
    if (!f.prefetch->into_l1) continue;
    ++into_l1;
    const std::vector<int64_t> index = kiln::testing::IndexValues(f.prefetch->index, f.loops);
    for (size_t point = 0; point < index.size(); ++point) {
      const int64_t tile = LoopValueAt(point, f.loops, "tile");
      const int64_t step = LoopValueAt(point, f.loops, "k");
      ASSERT_GE(tile, 0) << LoopFunctionToString(spec.function);
      ASSERT_GE(step, 0) << LoopFunctionToString(spec.function);
      const int64_t jb = tile / row_blocks;
      offsets[{jb, step}].insert(index[point] - (jb * k + step + 16) * nr);
    }
  }
  ASSERT_EQ(into_l1, nr / 16) << LoopFunctionToString(spec.function);
  std::set<int64_t> whole_row;
  for (int64_t e = 0; e < nr; e += 16) whole_row.insert(e);
  for (const auto& [at, asked] : offsets) {
    EXPECT_EQ(asked, whole_row) << "jb " << at.first << " k " << at.second;
  }

  ContractionCase short_k = MakeDenseBiasReluCase(m, 64, n, 73);
  Check(short_k.build, short_k.x, short_k.want);
  for (const PrefetchInLoops& f : PrefetchesIn(FirstKernelOf(short_k.build()).function.body)) {
    EXPECT_FALSE(f.prefetch->into_l1);
  }
}

// x (batch, m, k) times w (k, n) or times x's own transpose, in float64.
std::vector<float> RefMatmul64(const std::vector<float>& x, const std::vector<float>* w,
                               int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<float> out(batch * m * n);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t r = 0; r < k; ++r) {
          const double rhs = w ? (*w)[r * n + j] : x[(b * m + j) * k + r];
          sum += static_cast<double>(x[(b * m + i) * k + r]) * rhs;
        }
        out[(b * m + i) * n + j] = static_cast<float>(sum);
      }
    }
  }
  return out;
}

// A flat tile over an A read in place beyond 4 MB (1031 x 1024 floats)
// prefetches, at each line of k steps, the line 6 ahead in each of its rows
// (the last tile's extra rows reread the last one), and nothing of the next
// B panel; relu(dense + bias) matches float64 on 1 and 2 threads. A smaller
// A (TilesInParallelPrefetchTheNextColumnBlocksPanel) keeps the next panel's
// prefetches and asks for none of A.
TEST_F(ContractionScheduleTest, FlatTilesPrefetchALargeAsRowsAhead) {
  const int64_t m = 1031, k = 1024, n = 40;
  ContractionCase dense = MakeDenseBiasReluCase(m, k, n, 74);
  const KernelSpec spec = FirstKernelOf(dense.build());
  ASSERT_THAT(spec.schedule, HasSubstr("(A rows prefetched)"));
  int mr = 0, nr = 0;
  ASSERT_EQ(std::sscanf(spec.schedule.c_str(), "gemm %dx%d", &mr, &nr), 2) << spec.schedule;
  const int64_t row_blocks = (m + mr - 1) / mr;
  const std::vector<PrefetchInLoops> found = PrefetchesIn(spec.function.body);
  // Lines of A asked for, by (tile, k line); the x buffer is parameter 0.
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> asked;
  int64_t lines_per_row = 0;
  for (const PrefetchInLoops& f : found) {
    if (f.prefetch->into_l1) continue;  // the current B panel's rows ahead
    ASSERT_EQ(f.prefetch->buffer, 0) << "a prefetch of the next B panel\n"
                                     << LoopFunctionToString(spec.function);
    for (const te::Var& v : f.loops) {
      if (v->name == "k_line") lines_per_row = v->extent;
    }
    const std::vector<int64_t> index = kiln::testing::IndexValues(f.prefetch->index, f.loops);
    for (size_t point = 0; point < index.size(); ++point) {
      const int64_t tile = LoopValueAt(point, f.loops, "tile");
      const int64_t line = LoopValueAt(point, f.loops, "k_line");
      ASSERT_GE(tile, 0) << LoopFunctionToString(spec.function);
      ASSERT_GE(line, 0) << LoopFunctionToString(spec.function);
      asked[{tile, line}].insert(index[point]);
    }
  }
  ASSERT_EQ(lines_per_row, k / 16) << LoopFunctionToString(spec.function);
  const int64_t column_blocks = (n + nr - 1) / nr;
  ASSERT_EQ(static_cast<int64_t>(asked.size()), column_blocks * row_blocks * lines_per_row);
  for (const auto& [at, indices] : asked) {
    const int64_t ib = at.first % row_blocks;
    std::set<int64_t> expected;
    for (int64_t r = 0; r < mr; ++r) {
      expected.insert(std::min(ib * mr + r, m - 1) * k + (at.second + 6) * 16);
    }
    ASSERT_EQ(indices, expected) << "tile " << at.first << " line " << at.second;
  }
  for (int threads : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    runtime::SetParallelThreads(threads);
    Check(dense.build, dense.x, dense.want, "gemm", /*tolerance=*/1e-4);
  }
  runtime::SetParallelThreads(1);
}

// Flat tiles whose B panel outgrows L1 (and so prefetch its rows ahead) at
// shapes no tile divides, on 1 and 2 threads, against float64: a constant
// B (97 x 777 times 777 x 201, the panel packed at compile time) and a
// batched product with an activation B (x times its own transpose, three
// 70 x 301 blocks: the panel packed per call).
TEST_F(ContractionScheduleTest, OddShapesWithPanelsBeyondL1OnOneAndTwoThreads) {
  const int64_t m = 97, k = 777, n = 201;
  auto x = Pseudorandom(m * k, 80), w = Pseudorandom(k * n, 81);
  auto constant_b = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(Op(g, "matmul", {in, g.AddConstant("w", FloatValues({k, n}, w))}));
    return g;
  };
  const int64_t batch = 3, rows = 70, depth = 301;
  auto xb = Pseudorandom(batch * rows * depth, 82);
  auto activation_b = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {batch, rows, depth}});
    Node* t = Op(g, "transpose", {in}, TransposeAttrs{{0, 2, 1}});
    g.AddOutput(Op(g, "matmul", {in, t}));
    return g;
  };
  const std::vector<float> want = RefMatmul64(x, &w, 1, m, k, n);
  const std::vector<float> want_b = RefMatmul64(xb, nullptr, batch, rows, depth, rows);
  for (const std::function<Graph()>& build :
       std::vector<std::function<Graph()>>{constant_b, activation_b}) {
    const KernelSpec spec = FirstKernelOf(build(), XeonTiles());
    bool into_l1 = false;
    const std::vector<PrefetchInLoops> found = PrefetchesIn(spec.function.body);
    for (const PrefetchInLoops& f : found) into_l1 |= f.prefetch->into_l1;
    EXPECT_TRUE(into_l1) << LoopFunctionToString(spec.function);
  }
  EXPECT_THAT(TempsOf(activation_b()), ::testing::Contains("b_panel"));
  // The program says what the kernel's temporaries take while it runs.
  absl::StatusOr<LoweredProgram> lowered = CompileGraph(activation_b(), XeonTiles());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_GE(lowered->program.kernels[0].temp_bytes, batch * rows * depth * 4);
  EXPECT_EQ(lowered->program.kernels[0].temp_bytes, TemporaryBytes(lowered->kernels[0].function));
  for (int threads : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    runtime::SetParallelThreads(threads);
    Check(constant_b, x, want, "gemm", /*tolerance=*/1e-4, XeonTiles());
    Check(activation_b, xb, want_b, "gemm", /*tolerance=*/1e-4, XeonTiles());
  }
  runtime::SetParallelThreads(1);
}

// Padded planes of at least 1024 elements are copied in parallel by rows,
// each element selecting zero in the padding rows: a 3x3 conv with a
// residual whose two images join the pixels of channel lanes (so images and
// rows split together), and a 7x7 stride-2 stem whose phase rows begin and
// end in padding. A small plane keeps the copy by channels.
TEST_F(ContractionScheduleTest, LargePlanesArePaddedByRows) {
  ContractionCase conv = MakeConvResidualCase(2, 16, 32, 64, 60);  // 34 x 34 padded
  Check(conv.build, conv.x, conv.want, "(channel lanes) (padded by rows)");

  const int64_t n = 1, c = 3, h = 66, o = 16;  // phases of 36 x 36
  auto x = Pseudorandom(n * c * h * h, 61), w = Pseudorandom(o * c * 49, 62);
  auto bias = Pseudorandom(o, 63);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    g.AddOutput(Op(g, "relu", {AddConv(g, in, w, {o, c, 7, 7}, bias, 2, 3)}));
    return g;
  };
  Check(build, x, Relu(kiln::testing::RefConv2DStrided(x, w, bias, n, c, h, h, o, 7, 7, 2, 3)),
        "(padded by rows)");

  EXPECT_THAT(ScheduleOf(MakeConvResidualCase(1, 4, 8, 8, 64).build()),
              Not(HasSubstr("(padded by rows)")));
}

// Where all images' padded input outgrows L2, a conv runs image by image and
// copies each image's padded input just before its tiles: in channel lanes
// with all threads on one image (into a buffer of one image), in K blocks
// with images in parallel, and with the usual tiling (a 1x1 stride-2 conv
// with padding, images in parallel), each thread into its images' places.
TEST_F(ContractionScheduleTest, LargeBatchesArePaddedPerImage) {
  ContractionCase lanes = MakeConvResidualCase(2, 64, 48, 64, 70);
  Check(lanes.build, lanes.x, lanes.want, "(channel lanes) (padded per image)");
  // One image's padded input (64 x 50 x 50) and its slack, not two.
  for (const lower::BufferDecl& b : FirstKernelOf(lanes.build()).function.buffers) {
    if (b.name == "padded_input") EXPECT_LT(b.num_elements, 64 * 50 * 50 + 1000);
  }

  ContractionCase blocks = MakeConvResidualCase(2, 512, 16, 64, 71);
  Check(blocks.build, blocks.x, blocks.want, "(K blocks) (padded per image)", /*tolerance=*/1e-3);

  const int64_t n = 2, c = 32, h = 72, o = 64;
  auto x = Pseudorandom(n * c * h * h, 72), w = Pseudorandom(o * c, 73);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    g.AddOutput(AddConv(g, in, w, {o, c, 1, 1}, {}, 2, 1));
    return g;
  };
  Check(build, x, kiln::testing::RefConv2DStrided(x, w, {}, n, c, h, h, o, 1, 1, 2, 1),
        "(padded per image)");
}

// A 7x7 stride-2 stem (ResNet's shape, smaller): odd window, padding 3, and
// an input width that is odd in the phase split.
TEST_F(ContractionScheduleTest, StemConvSevenBySevenStrideTwo) {
  const int64_t c = 3, h = 21, o = 16;
  auto x = Pseudorandom(c * h * h, 20), w = Pseudorandom(o * c * 49, 21);
  auto bias = Pseudorandom(o, 22);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {1, c, h, h}});
    g.AddOutput(Op(g, "relu", {AddConv(g, in, w, {o, c, 7, 7}, bias, 2, 3)}));
    return g;
  };
  Check(build, x, Relu(kiln::testing::RefConv2DStrided(x, w, bias, 1, c, h, h, o, 7, 7, 2, 3)));
}

// Channel lanes split their tiles into parts of pixels, so each thread reads
// the pixels its share of the producer wrote. 784 pixels make 131 tiles of 6,
// which neither 4 nor 2 parts divide: the parts are rounded up, and the last
// part redoes the last tile rather than the split falling back to column
// blocks (each thread then reading the whole input).
TEST_F(ContractionScheduleTest, ChannelLanesSplitRaggedPixelTilesIntoParts) {
  ContractionCase conv = MakeConvResidualCase(1, 64, 28, 128, 80);
  Check(conv.build, conv.x, conv.want, "(channel lanes)", 1e-4, XeonTiles());
  const KernelSpec kernel = FirstKernelOf(conv.build(), XeonTiles());
  int mr = 0, nr = 0, m = 0, n = 0;
  ASSERT_EQ(std::sscanf(kernel.schedule.c_str(), "gemm %dx%d M=%d N=%d", &mr, &nr, &m, &n), 4)
      << kernel.schedule;
  const int row_blocks = (m + mr - 1) / mr, col_blocks = (n + nr - 1) / nr;
  ASSERT_NE(row_blocks % 4, 0) << "the case no longer needs a ragged split";
  const std::string nest = lower::LoopFunctionToString(kernel.function);
  EXPECT_THAT(nest, HasSubstr(absl::StrCat("parallel for tile in [0, ",
                                           col_blocks * 4 * ((row_blocks + 3) / 4), ")")));
}

// Values that are integers in [-limit, limit].
std::vector<float> SmallIntegers(int64_t count, uint32_t seed, float limit) {
  std::vector<float> v = Pseudorandom(count, seed);
  for (float& f : v) f = std::nearbyint(f * limit);
  return v;
}

// The storage of the first kernel's packed constant panel (".packed"), or
// "float32" when it keeps the compute type; "none" without a packed panel.
std::string PackedStorageOf(const KernelSpec& kernel) {
  for (const lower::BufferDecl& b : kernel.function.buffers) {
    if (!absl::EndsWith(b.name, ".packed")) continue;
    return b.storage ? std::string(DTypeName(*b.storage)) : "float32";
  }
  return "none";
}

// Weights that are small integers (quantised weights, centered) are packed
// as int8 or int16 and converted to float32 as they are loaded: the sums are
// the float32 ones, exactly (every product and partial sum here is an
// integer below 2^24, so the reference in double is exact too).
TEST_F(ContractionScheduleTest, IntegerWeightsArePackedNarrowAndSumExactly) {
  const int64_t n = 2, c = 64, h = 7, o = 40;
  auto x = SmallIntegers(n * c * h * h, 90, 8), w = SmallIntegers(o * c * 9, 91, 127);
  auto bias = SmallIntegers(o, 92, 1000);
  auto build_conv = [=] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    g.AddOutput(AddConv(g, in, w, {o, c, 3, 3}, bias, 1, 1));
    return g;
  };
  const KernelSpec conv = FirstKernelOf(build_conv());
  EXPECT_EQ(PackedStorageOf(conv), "int8");
  EXPECT_THAT(lower::LoopFunctionToString(conv.function), HasSubstr("] stored int8"));
  Check(build_conv, x, kiln::testing::RefConv2DStrided(x, w, bias, n, c, h, h, o, 3, 3, 1, 1),
        "(channel lanes)", /*tolerance=*/0);

  // Weights up to 300 (uint8 weights less their zero point) need int16.
  const int64_t m = 5, k = 300, cols = 70;
  auto a = SmallIntegers(m * k, 93, 100), wide = SmallIntegers(cols * k, 94, 300);
  auto build_dense = [=] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(Op(g, "dense", {in, g.AddConstant("w", FloatValues({cols, k}, wide))}));
    return g;
  };
  EXPECT_EQ(PackedStorageOf(FirstKernelOf(build_dense())), "int16");
  Check(build_dense, a, kiln::testing::RefDense(a, wide, {}, m, k, cols), "gemm",
        /*tolerance=*/0);
}

// Same structure, weights one half off integers: float32 panels, and a
// kernel of their own. Compiled after the integer model by the same
// manager, it must not reuse the integer model's kernel (its panel would be
// read as bytes), so the narrowing is part of the kernel's key.
TEST_F(ContractionScheduleTest, FractionalWeightsStayFloatAndDoNotShareIntegerKernels) {
  const int64_t m = 5, k = 300, cols = 70;
  // Quarters times halves: every sum is exact, in float32 and in the reference.
  auto a = SmallIntegers(m * k, 95, 40), ints = SmallIntegers(cols * k, 96, 100);
  for (float& v : a) v /= 4;
  std::vector<float> halves = ints;
  for (float& v : halves) v += 0.5f;
  auto build = [=](const std::vector<float>& w) {
    return [=] {
      Graph g;
      Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
      g.AddOutput(Op(g, "dense", {in, g.AddConstant("w", FloatValues({cols, k}, w))}));
      return g;
    };
  };
  const KernelSpec narrow = FirstKernelOf(build(ints)()), wide = FirstKernelOf(build(halves)());
  EXPECT_EQ(PackedStorageOf(narrow), "int8");
  EXPECT_EQ(PackedStorageOf(wide), "float32");
  EXPECT_NE(narrow.canonical, wide.canonical);
  Check(build(ints), a, kiln::testing::RefDense(a, ints, {}, m, k, cols), "gemm", 0);
  Check(build(halves), a, kiln::testing::RefDense(a, halves, {}, m, k, cols), "gemm", 0);
}

}  // namespace
}  // namespace kiln::lower
