#include "compiler/passes/fold_constant.h"

#include "compiler/driver/compile.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::Op;

TEST(FoldConstantTest, ConstantSubgraphBecomesOneConstantWithItsValue) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 3}});
  Node* c = g.AddConstant("c", FloatConstant({2, 3}, 1.5f));
  Node* two = g.AddConstant("two", FloatConstant({}, 2.0f));
  Node* folded = Op(g, "mul", {Op(g, "add", {c, c}), two});  // (1.5 + 1.5) * 2 = 6
  g.AddOutput(Op(g, "add", {x, folded}));
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->kernels.size(), 1u);
  EXPECT_EQ(program->kernels[0].ops, std::vector<std::string>{"add"});
  const ValueSpec& arg = program->program.values[program->program.kernels[0].args[1]];
  ASSERT_EQ(arg.kind, ValueSpec::Kind::kConstant);
  ASSERT_EQ(arg.type.NumElements(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(arg.constant->data<float>()[i], 6.0f);
}

TEST(FoldConstantTest, SkippedBelowOptLevelTwo) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2}});
  Node* c = g.AddConstant("c", FloatConstant({2}, 1.0f));
  g.AddOutput(Op(g, "add", {x, Op(g, "exp", {c})}));
  CompileOptions options;
  options.opt_level = 1;
  absl::StatusOr<LoweredProgram> program = CompileGraph(std::move(g), options);
  ASSERT_TRUE(program.ok()) << program.status();
  // exp(c) was not folded: it fuses with the add into one kernel of two ops.
  ASSERT_EQ(program->kernels.size(), 1u);
  EXPECT_EQ(program->kernels[0].ops.size(), 2u);
  bool skipped = false;
  for (const PassRecord& r : program->record.passes) {
    if (r.name == "FoldConstant") skipped = r.skipped && r.skip_reason == "opt_level 2 > 1";
  }
  EXPECT_TRUE(skipped);
}

}  // namespace
}  // namespace kiln
