#include "compiler/passes/fold_constant.h"

#include <limits>
#include <string>

#include "compiler/driver/compile.h"
#include "compiler/ir/element_access.h"
#include "compiler/passes/infer_type.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::FloatValues;
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

// Folds `g` (its output an op over constants) with FoldConstant
// and returns the output constant's bytes.
std::string FoldedBytes(Graph g) {
  EXPECT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = CreateFoldConstantPass()->Run(g, PassContext{});
  EXPECT_TRUE(changed.ok() && *changed);
  const Node* out = g.outputs()[0];
  EXPECT_TRUE(out->is_constant());
  return out->is_constant() ? std::string(out->value->bytes.view()) : "";
}

// Casts to float32 and float32 arithmetic fold by plain loops; the element
// evaluator (EvaluateConstantNode, the op definitions run element by
// element) must agree bit for bit, broadcasting, NaN, infinities and
// rounding included.
TEST(FoldConstantTest, DirectFoldingAgreesWithTheEvaluatorBitForBit) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a_values = {
      1.5f,   -2.25f, 3e38f,  -0.0f,
      1e-45f, inf,    -inf,   std::numeric_limits<float>::quiet_NaN(),
      0.1f,   7.0f,   -1e-7f, 16777217.0f,
      3.0f,   0.3f,   -5.5f,  2.0f,
      1e20f,  -3.0f,  0.0f,   1.0f / 3,
      9.0f,   -9.0f,  4.0f,   8.0f};
  const std::vector<float> b_values = {3.0f, -0.0f, 1e-30f};
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  for (const Shapes& shapes : {Shapes{{2, 3, 4}, {3, 1}}, Shapes{{2, 3, 4}, {1}},
                               Shapes{{3, 1}, {2, 3, 4}}, Shapes{{2, 3, 4}, {2, 3, 4}}}) {
    for (const char* op : {"add", "sub", "mul", "div"}) {
      SCOPED_TRACE(op);
      auto values = [&](const std::vector<int64_t>& shape, const std::vector<float>& pool) {
        std::vector<float> v(TensorType{DType::kFloat32, shape}.NumElements());
        for (size_t i = 0; i < v.size(); ++i) v[i] = pool[(i * 7) % pool.size()];
        return FloatValues(shape, v);
      };
      Graph g;
      Node* a = g.AddConstant("a", values(shapes.a, shapes.a.size() == 3 ? a_values : b_values));
      Node* b = g.AddConstant("b", values(shapes.b, shapes.b.size() == 3 ? a_values : b_values));
      Node* y = Op(g, op, {a, b});
      g.AddOutput(y);
      ASSERT_TRUE(InferTypes(g).ok());
      absl::StatusOr<std::shared_ptr<const ConstantData>> want = EvaluateConstantNode(*y);
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(FoldedBytes(std::move(g)), (*want)->bytes);
    }
  }
  // Integers to float32, int64 beyond 2^24 (rounded) included.
  for (DType from : {DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
    SCOPED_TRACE(DTypeName(from));
    const std::vector<int64_t> ints = {
        -128, 0, 1, 127, 255, -1, 16777217, -2147483648LL, int64_t{1} << 62, 99};
    auto data = std::make_shared<ConstantData>();
    data->type = TensorType{from, {static_cast<int64_t>(ints.size())}};
    data->bytes.resize(data->type.ByteSize());
    for (size_t i = 0; i < ints.size(); ++i) {
      WriteElementFromInt(from, data->bytes.data(), static_cast<int64_t>(i), ints[i]);
    }
    Graph g;
    Node* y = Op(g, "cast", {g.AddConstant("x", data)}, CastAttrs{DType::kFloat32});
    g.AddOutput(y);
    ASSERT_TRUE(InferTypes(g).ok());
    absl::StatusOr<std::shared_ptr<const ConstantData>> want = EvaluateConstantNode(*y);
    ASSERT_TRUE(want.ok()) << want.status();
    const std::string got = FoldedBytes(std::move(g));
    EXPECT_EQ(got, (*want)->bytes);
    // And by hand: int8 wraps 255 to -1 and 16777217 to 1; int32 rounds 2^24 + 1 to 2^24.
    if (from == DType::kInt32)
      EXPECT_EQ(reinterpret_cast<const float*>(got.data())[6], 16777216.0f);
    if (from == DType::kInt8) EXPECT_EQ(reinterpret_cast<const float*>(got.data())[4], -1.0f);
  }
}

}  // namespace
}  // namespace kiln
