#include "compiler/passes/fold_empty.h"

#include <string>

#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::Op;
using ::testing::HasSubstr;

TEST(FoldEmptyTest, AnEmptyResultIsAnEmptyConstantAndNoKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {0, 3}});
  g.AddOutput(Op(g, "mul", {Op(g, "relu", {x}), x}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->program.kernels.empty());
  const ValueSpec& out = p->program.values[p->program.outputs[0]];
  EXPECT_EQ(out.kind, ValueSpec::Kind::kConstant);
  EXPECT_EQ(out.type, (TensorType{DType::kFloat32, {0, 3}}));
}

TEST(FoldEmptyTest, RunsBelowEveryOtherPassesOptLevel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, 0}});
  g.AddOutput(Op(g, "exp", {x}));
  CompileOptions options;
  options.opt_level = 0;
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), options);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->program.kernels.empty());
}

TEST(FoldEmptyTest, DisabledItIsAFailedPreconditionNotAnEmptyKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {0, 3}});
  g.AddOutput(Op(g, "relu", {x}));
  CompileOptions options;
  options.disabled_passes = {"FoldEmpty"};
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), options);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
}

TEST(FoldEmptyTest, AReductionOverTheEmptyDimKeepsItsKernel) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {0, 3}});
  g.AddOutput(Op(g, "sum", {x}, ReduceAttrs{{0}, false}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->program.kernels.size(), 1u);
}

TEST(FoldEmptyTest, AnInjectiveReadOfAnEmptyTensorIntoANonEmptyOneIsUnimplemented) {
  Graph g;
  Node* a = g.AddInput("a", {DType::kFloat32, {0, 3}});
  Node* b = g.AddInput("b", {DType::kFloat32, {2, 3}});
  g.AddOutput(Op(g, "concat", {a, b}, AxisAttrs{0}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented) << p.status();
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("zero-size"));
}

}  // namespace
}  // namespace kiln
