// Schedule overrides: their text form, the plan's validation (an override
// that does not fit the shape is ignored, with a reason), and the numbers a
// forced layout, tile, K blocking or pixel split computes, each against a
// plain reference loop (reference_ops.h), so a tuned kernel is checked to
// compute what the untuned one does.
#include "compiler/lower/schedule_override.h"

#include <cmath>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "compiler/lower/contraction_plan.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::lower {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using ::testing::HasSubstr;
using Layout = ContractionPlan::Layout;

ScheduleOverride Forced(std::optional<Layout> layout, int mr, int nv, int64_t k_block_span = -1,
                        int64_t parts = 0) {
  ScheduleOverride o;
  o.layout = layout;
  o.mr = mr;
  o.nv = nv;
  o.k_block_span = k_block_span;
  o.pixel_parts = parts;
  return o;
}

TEST(ScheduleOverrideTest, TextRoundTrips) {
  const ScheduleOverride o = Forced(Layout::kChannelLanes, 6, 2, 4, 2);
  EXPECT_EQ(o.ToString(), "layout=lanes tile=6x32 kblock=4 parts=2");
  std::optional<ScheduleOverride> back = ParseScheduleOverride(o.ToString());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, o);
  EXPECT_EQ(back->mr, 6);
  EXPECT_EQ(back->nv, 2);
  EXPECT_TRUE(ParseScheduleOverride("")->empty());
  EXPECT_FALSE(ParseScheduleOverride("tile=6x20").has_value());  // not whole vectors
  EXPECT_FALSE(ParseScheduleOverride("layout=diagonal").has_value());
  EXPECT_FALSE(ParseScheduleOverride("speed=11").has_value());
}

ContractionShape Gemm(int64_t m, int64_t n, int64_t k) {
  ContractionShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.k_outer = k;
  return s;
}

TEST(ScheduleOverrideTest, PlanFollowsALegalOverride) {
  const ScheduleOverride o = Forced(std::nullopt, 3, 2, /*k_block_span=*/64);
  std::string ignored;
  const ContractionPlan p = PlanContraction(Gemm(100, 200, 256), {}, &o, &ignored);
  EXPECT_EQ(ignored, "");
  EXPECT_EQ(p.tile.mr, 3);
  EXPECT_EQ(p.tile.nr(), 32);
  EXPECT_EQ(p.mb, 34);  // ceil(100 / 3)
  EXPECT_EQ(p.nb, 7);   // ceil(200 / 32)
  EXPECT_EQ(p.k_block_span, 64);
  // The override that reproduces a plan gives that plan back.
  const ScheduleOverride same = OverrideOf(p);
  const ContractionPlan again = PlanContraction(Gemm(100, 200, 256), {}, &same, &ignored);
  EXPECT_EQ(again.Summary(), p.Summary());
  EXPECT_EQ(ignored, "");
}

TEST(ScheduleOverrideTest, IllegalOverridesAreIgnoredWithAReason) {
  const ContractionShape s = Gemm(100, 200, 256);
  const std::string estimated = PlanContraction(s).Summary();
  struct Case {
    ScheduleOverride o;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {Forced(std::nullopt, 9, 1), "does not fit the registers"},
      {Forced(std::nullopt, 8, 4), "does not fit the registers"},  // 8*4 + 4 > 30
      {Forced(Layout::kRowTiles, 0, 0), "row tiles apply only"},
      {Forced(Layout::kChannelLanes, 0, 0), "channel lanes apply only"},
      {Forced(std::nullopt, 0, 0, /*k_block_span=*/100), "do not divide"},
      {Forced(std::nullopt, 0, 0, /*k_block_span=*/256), "do not divide"},
      {Forced(std::nullopt, 0, 0, -1, /*parts=*/2), "pixel parts apply only"},
  };
  for (const Case& c : cases) {
    std::string ignored;
    const ContractionPlan p = PlanContraction(s, {}, &c.o, &ignored);
    EXPECT_THAT(ignored, HasSubstr(c.reason)) << c.o.ToString();
    EXPECT_EQ(p.Summary(), estimated) << c.o.ToString();
  }
}

class ScheduleOverrideRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Compiles `g` with `o` for every contraction, checks the override was
  // followed (its kernel's `tuned`) and that the summary holds `schedule`,
  // runs it on `x` and compares with `want`.
  void CheckForced(Graph g, const ScheduleOverride& o, const std::string& schedule,
                   const std::vector<float>& x, const std::vector<float>& want) {
    SCOPED_TRACE(o.ToString());
    CompileOptions options;
    options.schedule_overrides = [o](const std::string&) { return o; };
    const TensorType type = g.inputs()[0]->type;
    {
      Graph copy = g.Clone();
      auto lowered = CompileGraph(std::move(copy), options);
      ASSERT_TRUE(lowered.ok()) << lowered.status();
      ASSERT_EQ(lowered->kernels.size(), 1u);
      EXPECT_EQ(lowered->kernels[0].override_ignored, "");
      EXPECT_EQ(lowered->kernels[0].tuned, o.ToString());
      EXPECT_THAT(lowered->kernels[0].schedule, HasSubstr(schedule));
    }
    auto r = manager_->Compile("m", std::move(g), options);
    ASSERT_TRUE(r.ok()) << r.status();
    auto input = runtime::Tensor::FromBytes(
        type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
    ASSERT_TRUE(input.ok());
    auto result = manager_->Find("m")->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const float* got = static_cast<const float*>(result->outputs[0].data());
    ASSERT_EQ(result->outputs[0].type().NumElements(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::fabs(double(want[i])))) << i;
    }
  }

  std::unique_ptr<engine::ModelManager> manager_;
};

// dense(x, w) + b, 13 x 96 by 96 -> 50: tiles that leave row and column tails.
TEST_F(ScheduleOverrideRunTest, ForcedDenseTilesMatchTheReference) {
  const int64_t m = 13, k = 96, n = 50;
  auto x = Pseudorandom(m * k, 7), w = Pseudorandom(n * k, 8), b = Pseudorandom(n, 9);
  const std::vector<float> want = kiln::testing::RefDense(x, w, b, m, k, n);
  for (const ScheduleOverride& o :
       {Forced(std::nullopt, 1, 1), Forced(std::nullopt, 5, 3), Forced(std::nullopt, 8, 2),
        Forced(Layout::kFlatTiles, 2, 4, /*k_block_span=*/24)}) {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(Op(
        g, "dense",
        {in, g.AddConstant("w", FloatValues({n, k}, w)), g.AddConstant("b", FloatValues({n}, b))}));
    CheckForced(std::move(g), o, absl::StrCat("gemm ", o.mr, "x", o.nv * 16), x, want);
  }
}

// A 3x3 pad-1 conv of 2 images, 16 -> 24 channels at 10x10, in each layout
// the conv allows, with K blocks over the input channels and pixel parts.
TEST_F(ScheduleOverrideRunTest, ForcedConvLayoutsMatchTheReference) {
  const int64_t n = 2, c = 16, h = 10, o = 24;
  auto x = Pseudorandom(n * c * h * h, 11), w = Pseudorandom(o * c * 9, 12);
  auto b = Pseudorandom(o, 13);
  const std::vector<float> want =
      kiln::testing::RefConv2DStrided(x, w, b, n, c, h, h, o, 3, 3, 1, 1);
  struct Case {
    ScheduleOverride o;
    std::string schedule;
  };
  const std::vector<Case> cases = {
      {Forced(Layout::kFlatTiles, 4, 1), "gemm 4x16"},
      {Forced(Layout::kRowTiles, 2, 1), "(row tiles)"},
      {Forced(Layout::kChannelLanes, 6, 2), "(channel lanes)"},
      {Forced(Layout::kChannelLanes, 4, 1, /*k_block_span=*/4), "(K blocks)"},
      {Forced(Layout::kFlatTiles, 3, 2, /*k_block_span=*/8), "(K blocks)"},
      {Forced(Layout::kChannelLanes, 2, 1, /*k_block_span=*/0, /*parts=*/2), "(channel lanes)"},
      // 100 row blocks in 3 parts: the last part redoes a tile.
      {Forced(Layout::kChannelLanes, 2, 1, /*k_block_span=*/0, /*parts=*/3), "(channel lanes)"},
  };
  for (const Case& t : cases) {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {n, c, h, h}});
    Conv2DAttrs attrs;
    attrs.strides = {1, 1};
    attrs.padding = {1, 1, 1, 1};
    g.AddOutput(Op(g, "conv2d",
                   {in, g.AddConstant("w", FloatValues({o, c, 3, 3}, w)),
                    g.AddConstant("b", FloatValues({o}, b))},
                   attrs));
    CheckForced(std::move(g), t.o, t.schedule, x, want);
  }
}

// An override that does not fit is reported and the estimate's schedule runs.
TEST_F(ScheduleOverrideRunTest, IgnoredOverrideKeepsTheEstimate) {
  const int64_t m = 8, k = 64, n = 32;
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {m, k}});
    g.AddOutput(
        Op(g, "dense", {in, g.AddConstant("w", FloatValues({n, k}, Pseudorandom(n * k, 1)))}));
    return g;
  };
  auto plain = CompileGraph(build(), {});
  ASSERT_TRUE(plain.ok());
  CompileOptions options;
  options.schedule_overrides = [](const std::string&) { return Forced(Layout::kRowTiles, 2, 1); };
  auto forced = CompileGraph(build(), options);
  ASSERT_TRUE(forced.ok());
  EXPECT_THAT(forced->kernels[0].override_ignored, HasSubstr("row tiles apply only"));
  EXPECT_EQ(forced->kernels[0].tuned, "");
  EXPECT_EQ(forced->kernels[0].schedule, plain->kernels[0].schedule);
}

}  // namespace
}  // namespace kiln::lower
