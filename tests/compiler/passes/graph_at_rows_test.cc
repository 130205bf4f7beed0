#include "compiler/passes/graph_at_rows.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/passes/infer_type.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;
using ::testing::HasSubstr;

Graph Typed(Graph g) {
  absl::StatusOr<bool> typed = InferTypes(g);
  EXPECT_TRUE(typed.ok()) << typed.status();
  return g;
}

const Node* Named(const Graph& g, const std::string& name) {
  for (const Node* n : g.AllNodes()) {
    if (n->name == name) return n;
  }
  return nullptr;
}

// conv -> relu -> flatten by a reshape to [4, 96] -> matmul -> softmax: an
// export at batch 4, the batch baked into the reshape.
Graph ConvNet() {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 3, 4, 4}});
  Conv2DAttrs conv;
  conv.padding = {1, 1, 1, 1};
  Node* c =
      Op(g, "relu",
         {Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({6, 3, 3, 3}, Pseudorandom(162, 1)))},
             conv)});
  Node* flat = g.AddOp("flat", OpRegistry::Default().Find("reshape"), {c}, ReshapeAttrs{{4, 96}});
  Node* fc =
      Op(g, "matmul", {flat, g.AddConstant("fc", FloatValues({96, 10}, Pseudorandom(960, 2)))});
  g.AddOutput(Op(g, "softmax", {fc}, AxisAttrs{-1}), "y");
  return Typed(std::move(g));
}

// PyTorch's attention layout at batch 3: [B, S, E] -> [S, B, E] -> [S * B,
// E] -> projection -> [S, B, E] -> [B, S, E], plus x and x's mean over the
// sequence expanded to [3, 5, 8].
Graph MergedRows() {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {3, 5, 8}});
  Node* sbe = Op(g, "transpose", {x}, TransposeAttrs{{1, 0, 2}});
  Node* merged = Op(g, "reshape", {sbe}, ReshapeAttrs{{15, 8}});
  Node* proj =
      Op(g, "matmul", {merged, g.AddConstant("w", FloatValues({8, 8}, Pseudorandom(64, 3)))});
  Node* split = Op(g, "reshape", {proj}, ReshapeAttrs{{5, 3, 8}});
  Node* bse = Op(g, "transpose", {split}, TransposeAttrs{{1, 0, 2}});
  // Each sequence's mean over its positions, expanded back over them.
  Node* mean = Op(g, "mean", {x}, ReduceAttrs{{1}, true});
  Node* mask =
      g.AddOp("mask", OpRegistry::Default().Find("expand"), {mean}, ReshapeAttrs{{3, 5, 8}});
  Node* masked = Op(g, "add", {bse, mask});
  g.AddOutput(Op(g, "add", {masked, x}), "y");
  return Typed(std::move(g));
}

// Runs `g` (compiled whole) on `x`; its first output's floats.
std::vector<float> Run(engine::ModelManager& manager, const std::string& name, Graph g,
                       const std::vector<float>& x) {
  const TensorType in = g.inputs()[0]->type;
  absl::StatusOr<engine::CompileResult> compiled =
      manager.Compile(name, std::move(g), CompileOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  absl::StatusOr<Tensor> t = Tensor::FromBytes(
      in, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  EXPECT_TRUE(t.ok());
  absl::StatusOr<runtime::RunResult> r = manager.Find(name)->Run({&*t});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  const float* y = static_cast<const float*>(r->outputs[0].data());
  return std::vector<float>(y, y + r->outputs[0].type().NumElements());
}

// Each row of the whole batch's outputs is the graph at one row run on that
// row alone.
void ExpectRowByRow(const Graph& whole, int64_t rows) {
  engine::ModelManagerOptions options;
  options.cache.dir.clear();
  std::unique_ptr<engine::ModelManager> manager = *engine::ModelManager::Create(options);
  const int64_t row_in = whole.inputs()[0]->type.NumElements() / rows;
  const std::vector<float> x = Pseudorandom(row_in * rows, 9);
  const std::vector<float> want = Run(*manager, "whole", whole.Clone(), x);
  ASSERT_FALSE(want.empty());
  const int64_t row_out = static_cast<int64_t>(want.size()) / rows;
  for (int64_t r = 0; r < rows; ++r) {
    absl::StatusOr<Graph> one = GraphAtRows(whole, rows, 1);
    ASSERT_TRUE(one.ok()) << one.status();
    const std::vector<float> got =
        Run(*manager, absl::StrCat("row", r), *std::move(one),
            std::vector<float>(x.begin() + r * row_in, x.begin() + (r + 1) * row_in));
    ASSERT_EQ(static_cast<int64_t>(got.size()), row_out);
    for (int64_t i = 0; i < row_out; ++i) {
      ASSERT_NEAR(got[i], want[r * row_out + i], 1e-5f * std::max(1.0f, std::fabs(got[i])))
          << "row " << r << " element " << i;
    }
  }
}

TEST(GraphAtRowsTest, ABakedFlattenFollowsTheRows) {
  const Graph whole = ConvNet();
  absl::StatusOr<Graph> one = GraphAtRows(whole, 4, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->inputs()[0]->type.shape, (std::vector<int64_t>{1, 3, 4, 4}));
  EXPECT_EQ(std::get<ReshapeAttrs>(Named(*one, "flat")->attrs).shape,
            (std::vector<int64_t>{1, 96}));
  EXPECT_EQ(one->outputs()[0]->type.shape, (std::vector<int64_t>{1, 10}));
  absl::StatusOr<Graph> two = GraphAtRows(whole, 4, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->outputs()[0]->type.shape, (std::vector<int64_t>{2, 10}));
  ExpectRowByRow(whole, 4);
}

TEST(GraphAtRowsTest, MergedRowsAndAnExpandOfTheRowsFollowThem) {
  const Graph whole = MergedRows();
  absl::StatusOr<Graph> one = GraphAtRows(whole, 3, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(std::get<ReshapeAttrs>(Named(*one, "mask")->attrs).shape,
            (std::vector<int64_t>{1, 5, 8}));
  EXPECT_EQ(one->outputs()[0]->type.shape, (std::vector<int64_t>{1, 5, 8}));
  ExpectRowByRow(whole, 3);
}

// A constant of one value as tall as the batch (what ConstantOfShape makes
// of the batch's shape: PyTorch's attention selects from zeros of [B * H, 1,
// S]) is made as tall as the new batch where a row-carrying op broadcasts
// it, here through rows merged with the heads.
TEST(GraphAtRowsTest, AConstantOfOneValueAsTallAsTheBatchIsResized) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  Node* heads = Op(g, "reshape", {x}, ReshapeAttrs{{8, 1, 3}});  // [B * 2, 1, 3]
  Node* positive = Op(g, "greater", {heads, g.AddConstant("zero", FloatConstant({}, 0.0f))});
  Node* twos = g.AddConstant("twos", FloatConstant({8, 1, 3}, 2.0f));
  Node* picked =
      g.AddOp("picked", OpRegistry::Default().Find("where"), {positive, heads, twos}, NoAttrs{});
  Node* sum = g.AddOp("sum", OpRegistry::Default().Find("add"), {picked, twos}, NoAttrs{});
  g.AddOutput(Op(g, "reshape", {sum}, ReshapeAttrs{{4, 6}}), "y");
  const Graph whole = Typed(std::move(g));
  absl::StatusOr<Graph> one = GraphAtRows(whole, 4, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  const Node* remade = Named(*one, "picked")->inputs[2];
  EXPECT_EQ(remade->type.shape, (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(Named(*one, "sum")->inputs[1], remade);  // one constant for both readers
  ExpectRowByRow(whole, 4);
}

TEST(GraphAtRowsTest, AGraphMixingRowsIsRefused) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 6}});
  g.AddOutput(Op(g, "sub", {x, Op(g, "mean", {x}, ReduceAttrs{{0}, true})}), "y");
  const Graph whole = Typed(std::move(g));
  EXPECT_EQ(GraphAtRows(whole, 4, 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kiln
