// CompileGraph end to end up to the loop nests: fusion decisions, canonical
// forms and what the compile record says.
#include "compiler/driver/compile.h"

#include <cstring>

#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/ops/op_registry.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;

kiln::v1::Tensor Zeros(const std::string& name, std::vector<int64_t> dims) {
  kiln::v1::Tensor t;
  t.set_name(name);
  t.set_dtype(kiln::v1::FLOAT32);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  t.set_raw_data(std::string(n * 4, '\0'));
  return t;
}

kiln::v1::Graph Mlp() {
  kiln::v1::Graph g;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "mlp"
    inputs { name: "x" dtype: FLOAT32 dims: 4 dims: 16 }
    nodes { name: "d1" op: "dense" inputs: "x" inputs: "w1" inputs: "b1" }
    nodes { name: "r1" op: "relu" inputs: "d1" }
    nodes { name: "d2" op: "dense" inputs: "r1" inputs: "w2" inputs: "b2" }
    nodes { name: "r2" op: "relu" inputs: "d2" }
    nodes { name: "d3" op: "dense" inputs: "r2" inputs: "w3" inputs: "b3" }
    nodes { name: "sm" op: "softmax" inputs: "d3" attributes { key: "axis" value { i: -1 } } }
    outputs: "sm"
  )pb", &g);
  *g.add_constants() = Zeros("w1", {32, 16});
  *g.add_constants() = Zeros("b1", {32});
  *g.add_constants() = Zeros("w2", {32, 32});
  *g.add_constants() = Zeros("b2", {32});
  *g.add_constants() = Zeros("w3", {10, 32});
  *g.add_constants() = Zeros("b3", {10});
  return g;
}

TEST(CompileTest, FusesDenseWithItsReluAndKeepsSoftmaxApart) {
  absl::StatusOr<Graph> graph = ImportKilnGraph(Mlp(), OpRegistry::Default());
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<LoweredProgram> program = CompileGraph(*std::move(graph), CompileOptions{});
  ASSERT_TRUE(program.ok()) << program.status();
  // As TVM: dense absorbs its elementwise consumer; softmax is not elementwise,
  // so the last dense stands alone.
  ASSERT_EQ(program->kernels.size(), 4u);
  EXPECT_THAT(program->kernels[0].ops, ElementsAre("dense", "relu"));
  EXPECT_THAT(program->kernels[1].ops, ElementsAre("dense", "relu"));
  EXPECT_THAT(program->kernels[2].ops, ElementsAre("dense"));
  EXPECT_THAT(program->kernels[3].ops, ElementsAre("softmax"));
  // The two hidden layers differ in shape: different structure, different key.
  EXPECT_NE(program->kernels[0].canonical, program->kernels[1].canonical);
  // The program calls each kernel by its name, with one value per parameter.
  ASSERT_EQ(program->program.kernels.size(), program->kernels.size());
  for (size_t i = 0; i < program->kernels.size(); ++i) {
    const KernelSpec& k = program->kernels[i];
    SCOPED_TRACE(lower::LoopFunctionToString(k.function));
    EXPECT_EQ(program->program.kernels[i].name, k.name);
    EXPECT_EQ(k.function.name, k.name);
    EXPECT_EQ(program->program.kernels[i].args.size(), static_cast<size_t>(k.function.num_params));
    EXPECT_EQ(k.arg_types.size(), static_cast<size_t>(k.function.num_params));
  }
}

TEST(CompileTest, AtOptLevelZeroEveryOpIsItsOwnKernel) {
  absl::StatusOr<Graph> graph = ImportKilnGraph(Mlp(), OpRegistry::Default());
  ASSERT_TRUE(graph.ok());
  CompileOptions options;
  options.opt_level = 0;
  absl::StatusOr<LoweredProgram> program = CompileGraph(*std::move(graph), options);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->kernels.size(), 6u);
  bool fuse_skipped = false;
  for (const PassRecord& r : program->record.passes) {
    if (r.name == "FuseOps") fuse_skipped = r.skipped && r.skip_reason == "opt_level 1 > 0";
  }
  EXPECT_TRUE(fuse_skipped);
}

TEST(CompileTest, UnknownPassNameIsInvalidArgumentListingKnownPasses) {
  absl::StatusOr<Graph> graph = ImportKilnGraph(Mlp(), OpRegistry::Default());
  ASSERT_TRUE(graph.ok());
  CompileOptions options;
  options.disabled_passes = {"NoSuchPass"};
  absl::StatusOr<LoweredProgram> program = CompileGraph(*std::move(graph), options);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()), ::testing::HasSubstr("FuseOps"));
}

TEST(CompileTest, SoftmaxRowStatisticsAreHoistedIntoTemporaries) {
  absl::StatusOr<Graph> graph = ImportKilnGraph(Mlp(), OpRegistry::Default());
  ASSERT_TRUE(graph.ok());
  absl::StatusOr<LoweredProgram> program = CompileGraph(*std::move(graph), CompileOptions{});
  ASSERT_TRUE(program.ok());
  const lower::LoopFunction& fn = program->kernels[3].function;
  // Row max and row sum: two temporaries of one element per row (4 rows);
  // then the row of exps the sum and the output share, local to a thread
  // (row_stages.cc).
  ASSERT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params + 3))
      << lower::LoopFunctionToString(fn);
  EXPECT_EQ(fn.buffers[fn.num_params].num_elements, 4);
  EXPECT_EQ(fn.buffers[fn.num_params + 1].num_elements, 4);
  EXPECT_EQ(fn.buffers[fn.num_params + 2].num_elements, 10);
  EXPECT_TRUE(fn.buffers[fn.num_params + 2].local);
}

TEST(CompileTest, ShapeMismatchNamesTheNode) {
  kiln::v1::Graph g = Mlp();
  *g.mutable_constants(0) = Zeros("w1", {32, 15});
  absl::StatusOr<Graph> graph = ImportKilnGraph(g, OpRegistry::Default());
  ASSERT_TRUE(graph.ok());
  absl::StatusOr<LoweredProgram> program = CompileGraph(*std::move(graph), CompileOptions{});
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()), ::testing::HasSubstr("'d1'"));
}

}  // namespace
}  // namespace kiln
