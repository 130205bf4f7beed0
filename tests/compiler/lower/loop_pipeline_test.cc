// The loop pipeline: its passes run in their listed order under the graph
// passes' PassContext, so timing, IR dumps and disabling work as for graph
// passes, and the IR dumped after the last of them is what codegen receives.
#include "compiler/lower/loop_pipeline.h"

#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln::lower {
namespace {

using ::kiln::testing::Op;
using ::testing::ElementsAre;

// A padded stride-2 max pool (generic path: partitioning and strided blocking
// both apply) feeding a relu.
Graph PoolGraph() {
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {1, 2, 64, 64}});
  Pool2DAttrs attrs;
  attrs.kernel = {3, 3};
  attrs.strides = {2, 2};
  attrs.padding = {1, 1, 1, 1};
  g.AddOutput(Op(g, "relu", {Op(g, "max_pool2d", {in}, attrs)}));
  return g;
}

std::vector<const PassRecord*> LoopRecords(const LoweredProgram& p) {
  std::vector<const PassRecord*> out;
  bool inside = false;
  for (const PassRecord& r : p.record.passes) {
    if (r.depth == 0) inside = r.name == kLoopPipelineName;
    if (inside) out.push_back(&r);
  }
  return out;
}

TEST(LoopPipelineTest, RunsAfterTheGraphPassesInOrderAndNestsItsPasses) {
  absl::StatusOr<LoweredProgram> p = CompileGraph(PoolGraph(), CompileOptions{});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_FALSE(p->record.passes.empty());
  EXPECT_EQ(p->record.passes.front().name, "default");
  std::vector<std::string> names;
  std::vector<int> depths;
  for (const PassRecord* r : LoopRecords(*p)) {
    names.push_back(r->name);
    depths.push_back(r->depth);
  }
  EXPECT_THAT(names,
              ElementsAre("LowerLoops", "PartitionBoundaryLoops", "BlockStridedVectorLoops",
                          "BlockLaneDividedVectorLoops", "SimplifyIndices", "ReassociateIndices"));
  EXPECT_THAT(depths, ElementsAre(0, 1, 1, 1, 1, 1));
  // The pool's padded, stride-2 rows are what the first two passes rewrite.
  EXPECT_TRUE(LoopRecords(*p)[1]->changed);
  EXPECT_TRUE(LoopRecords(*p)[2]->changed);
}

// An elementwise op has no padded reads and no strides: those passes have
// nothing to do and say so (their rebuilt trees compare equal).
TEST(LoopPipelineTest, PassWithNothingToDoReportsUnchanged) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 64}});
  g.AddOutput(Op(g, "relu", {x}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<const PassRecord*> loops = LoopRecords(*p);
  ASSERT_EQ(loops.size(), 6u);
  EXPECT_FALSE(loops[1]->changed);  // PartitionBoundaryLoops
  EXPECT_FALSE(loops[2]->changed);  // BlockStridedVectorLoops
  EXPECT_FALSE(loops[3]->changed);  // BlockLaneDividedVectorLoops
}

TEST(LoopPipelineTest, SameStmtComparesStructureNotPointers) {
  te::ExprBuilder b1, b2;
  te::Var i = b1.NewVar("i", 16);
  auto nest = [&](te::ExprBuilder& b, int64_t offset) {
    return MakeFor(i, ForKind::kVectorized,
                   MakeStore(1, b.Ref(i), b.Add(b.Load(0, te::ScalarType::kF32, {b.Ref(i)}),
                                                b.Float(static_cast<double>(offset)))));
  };
  EXPECT_TRUE(SameStmt(nest(b1, 1), nest(b2, 1)));  // built apart, equal
  EXPECT_FALSE(SameStmt(nest(b1, 1), nest(b2, 2)));
}

TEST(LoopPipelineTest, DumpAfterTheLastPassIsWhatCodegenReceives) {
  CompileOptions options;
  options.print_ir_after = {"ReassociateIndices", "PartitionBoundaryLoops"};
  absl::StatusOr<LoweredProgram> p = CompileGraph(PoolGraph(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->record.ir_dumps.size(), 2u);
  EXPECT_EQ(p->record.ir_dumps[0].after_pass, "PartitionBoundaryLoops");
  EXPECT_EQ(p->record.ir_dumps[1].after_pass, "ReassociateIndices");
  std::string kernels;
  for (const KernelSpec& k : p->kernels) kernels += LoopFunctionToString(k.function);
  EXPECT_EQ(p->record.ir_dumps[1].text, kernels);
  EXPECT_NE(p->record.ir_dumps[0].text, kernels);
}

absl::StatusOr<LoweredProgram> CompileWithout(const std::string& pass) {
  CompileOptions options;
  options.disabled_passes = {pass};
  return CompileGraph(PoolGraph(), options);
}

TEST(LoopPipelineTest, DisabledLoopPassIsSkippedAndNamedOnTheKernels) {
  absl::StatusOr<LoweredProgram> p = CompileWithout("BlockStridedVectorLoops");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<const PassRecord*> loops = LoopRecords(*p);
  ASSERT_EQ(loops.size(), 6u);
  EXPECT_TRUE(loops[2]->skipped);
  EXPECT_EQ(loops[2]->skip_reason, "disabled");
  EXPECT_FALSE(loops[3]->skipped);
  for (const KernelSpec& k : p->kernels) {
    EXPECT_EQ(k.skipped_loop_passes, "BlockStridedVectorLoops");
    // Without blocking no loop is a kVector block loop.
    EXPECT_EQ(LoopFunctionToString(k.function).find("vector for"), std::string::npos);
  }
}

TEST(LoopPipelineTest, DisablingThePipelineSkipsEveryLoopPass) {
  absl::StatusOr<LoweredProgram> p = CompileWithout("LowerLoops");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(LoopRecords(*p).size(), 1u);
  EXPECT_TRUE(LoopRecords(*p)[0]->skipped);
  EXPECT_EQ(p->kernels[0].skipped_loop_passes,
            "PartitionBoundaryLoops,BlockStridedVectorLoops,BlockLaneDividedVectorLoops,"
            "SimplifyIndices,ReassociateIndices");
}

TEST(LoopPipelineTest, UnknownPassNamesAreStillRefused) {
  absl::StatusOr<LoweredProgram> p = CompileWithout("PartitionBoundaryLoop");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), ::testing::HasSubstr("PartitionBoundaryLoops"));
}

}  // namespace
}  // namespace kiln::lower
