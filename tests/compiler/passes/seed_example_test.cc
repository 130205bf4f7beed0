// Issue 3's seed example: the pipeline's decisions at opt levels 2 and 3.
//   y = add(c, c); y = mul(y, 2); y = add(conv2d(x, w), y);
//   z = add(y, c); z1 = add(y, c); z2 = add(z, z1)  -> z2
#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;

Graph SeedExample() {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, 64, 56, 56}});
  Node* w = g.AddConstant("weight", FloatConstant({64, 64, 3, 3}, 0.01f));
  Node* c = g.AddConstant("c", FloatConstant({1, 64, 54, 54}, 0.5f));
  Node* two = g.AddConstant("two", FloatConstant({}, 2.0f));
  Node* y = Op(g, "add", {c, c});
  y = Op(g, "mul", {y, two});
  y = Op(g, "add", {Op(g, "conv2d", {x, w}, Conv2DAttrs{}), y});
  Node* z = Op(g, "add", {y, c});
  Node* z1 = Op(g, "add", {y, c});
  g.AddOutput(Op(g, "add", {z, z1}));
  return g;
}

const PassRecord* Find(const LoweredProgram& p, const std::string& name) {
  for (const PassRecord& r : p.record.passes) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

TEST(SeedExampleTest, OptLevelTwoFoldsConstantsAndFusesConvWithFourAdds) {
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), CompileOptions{});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_THAT(p->kernels[0].ops,
              ::testing::ElementsAre("conv2d", "add", "add", "add", "add"));
  ASSERT_NE(Find(*p, "FoldConstant"), nullptr);
  EXPECT_TRUE(Find(*p, "FoldConstant")->changed);
  ASSERT_NE(Find(*p, "EliminateCommonSubexpr"), nullptr);
  EXPECT_TRUE(Find(*p, "EliminateCommonSubexpr")->skipped);
  EXPECT_EQ(Find(*p, "EliminateCommonSubexpr")->skip_reason, "opt_level 3 > 2");
}

TEST(SeedExampleTest, OptLevelThreeMergesTheTwinAdds) {
  CompileOptions options;
  options.opt_level = 3;
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_THAT(p->kernels[0].ops, ::testing::ElementsAre("conv2d", "add", "add", "add"));
  EXPECT_TRUE(Find(*p, "EliminateCommonSubexpr")->changed);
}

TEST(SeedExampleTest, OptLevelThreeWithoutCseKeepsFourAdds) {
  CompileOptions options;
  options.opt_level = 3;
  options.disabled_passes = {"EliminateCommonSubexpr"};
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].ops.size(), 5u);
  EXPECT_EQ(Find(*p, "EliminateCommonSubexpr")->skip_reason, "disabled");
}

TEST(SeedExampleTest, ReportListsEveryPassInPipelineOrder) {
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), CompileOptions{});
  ASSERT_TRUE(p.ok());
  // The graph pipeline, then the loop pipeline (loop_pipeline_test.cc).
  std::vector<std::string> names;
  for (const PassRecord& r : p->record.passes) {
    if (r.depth == 0 && !names.empty()) break;
    names.push_back(r.name);
  }
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "default", "InferType", "FoldEmpty", "SimplifyInference", "FoldConstant",
                         "SimplifyFakeQuant", "IntegerQdqConv", "IntegerQdqMatMul",
                         "RequantizeInKernel", "QuantizeInFloat64", "FoldScaleAxis",
                         "EliminateCommonSubexpr", "FuseAttention", "ConvertLayoutNchwc",
                         "WinogradConv", "DeadCodeElimination", "FuseOps", "FusePrologue"));
  EXPECT_EQ(p->record.passes[0].depth, 0);
  EXPECT_EQ(p->record.passes[1].depth, 1);
  // The pipeline's total covers its passes; its self time is what is left.
  double children = 0;
  for (size_t i = 1; i < names.size(); ++i) children += p->record.passes[i].ms;
  EXPECT_GE(p->record.passes[0].ms, children);
  EXPECT_NEAR(p->record.passes[0].self_ms, p->record.passes[0].ms - children, 1e-9);
  EXPECT_EQ(p->record.passes[1].self_ms, p->record.passes[1].ms);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(PassContextTest, PassWhosePrerequisiteIsDisabledIsSkippedWithReason) {
  CompileOptions options;
  options.disabled_passes = {"InferType"};
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), options);
  // Without types nothing can be lowered: a clear error, not a crash.
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PassContextTest, RequiredPassRunsAboveItsOptLevel) {
  CompileOptions options;
  options.opt_level = 2;
  options.required_passes = {"EliminateCommonSubexpr"};
  absl::StatusOr<LoweredProgram> p = CompileGraph(SeedExample(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(Find(*p, "EliminateCommonSubexpr")->skipped);
  EXPECT_EQ(p->kernels[0].ops.size(), 4u);
}

}  // namespace
}  // namespace kiln
