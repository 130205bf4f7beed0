// nonzero's and unique's registry entries: their folds (what the importer
// and FoldConstant use) and nonzero's compute, lowered to a JIT kernel over a
// run-time input with the count given, against results listed by hand and
// by plain loops.
#include "compiler/ops/value_shape_ops.h"

#include <cmath>
#include <optional>
#include <vector>

#include "compiler/driver/compile.h"
#include "compiler/ir/element_access.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Row-major positions of the nonzero elements of `x` (of `shape`), as
// nonzero lays them out: all of dim 0's coordinates, then dim 1's, ...
std::vector<int64_t> Reference(const std::vector<float>& x, const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> coordinates(shape.size());
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k] == 0) continue;
    int64_t rest = static_cast<int64_t>(k);
    for (size_t d = shape.size(); d-- > 0;) {
      coordinates[d].push_back(rest % shape[d]);
      rest /= shape[d];
    }
  }
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& c : coordinates) flat.insert(flat.end(), c.begin(), c.end());
  return flat;
}

std::vector<float> Pattern(int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = (i * 7919) % 5 < 2 ? static_cast<float>(i) - 3 : 0;
  return x;
}

// The folded value of nonzero over constant `x`.
absl::StatusOr<std::vector<int64_t>> Folded(const std::vector<float>& x,
                                            const std::vector<int64_t>& shape) {
  Graph g;
  g.AddInput("unused", {DType::kFloat32, {1}});
  auto data = testing::FloatValues(shape, x);
  const int64_t count = CountNonZero(*data);
  g.AddOutput(testing::Op(g, "nonzero", {g.AddConstant("x", data)}, NonZeroAttrs{count}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  if (!p.ok()) return p.status();
  const ValueSpec& out = p->program.values[p->program.outputs[0]];
  if (out.kind != ValueSpec::Kind::kConstant) return absl::InternalError("not folded");
  const int64_t* v = out.constant->data<int64_t>();
  return std::vector<int64_t>(v, v + out.type.NumElements());
}

TEST(ValueShapeOpsTest, FoldListsCoordinatesRowByRow) {
  // [[1, 0], [1, 1]]: nonzero at (0,0), (1,0), (1,1).
  absl::StatusOr<std::vector<int64_t>> v = Folded({1, 0, 1, 1}, {2, 2});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ElementsAre(0, 1, 1, 0, 0, 1));
}

TEST(ValueShapeOpsTest, FoldMatchesLoopsAndCountsNaN) {
  std::vector<float> x = Pattern(24);
  x[5] = NAN;
  x[7] = -0.0f;
  const std::vector<int64_t> shape = {2, 3, 4};
  absl::StatusOr<std::vector<int64_t>> v = Folded(x, shape);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ElementsAreArray(Reference(x, shape)));
}

TEST(ValueShapeOpsTest, AllZeroFoldsToAnEmptyResult) {
  absl::StatusOr<std::vector<int64_t>> v = Folded(std::vector<float>(6, 0), {3, 2});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->empty());
}

TEST(ValueShapeOpsTest, KernelFromComputeMatchesLoops) {
  const std::vector<int64_t> shape = {3, 5};
  const std::vector<float> x = Pattern(15);
  const std::vector<int64_t> want = Reference(x, shape);
  const int64_t count = static_cast<int64_t>(want.size()) / 2;
  ASSERT_GT(count, 0);
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, shape});
  g.AddOutput(testing::Op(g, "nonzero", {in}, NonZeroAttrs{count}));
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->Compile("nonzero", std::move(g), CompileOptions{}).ok());
  auto input = runtime::Tensor::FromBytes(
      {DType::kFloat32, shape},
      absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("nonzero")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs[0].type(), (TensorType{DType::kInt64, {2, count}}));
  const int64_t* y = static_cast<const int64_t*>(result->outputs[0].data());
  EXPECT_THAT(std::vector<int64_t>(y, y + want.size()), ElementsAreArray(want));
}

TEST(ValueShapeOpsTest, CountBeyondTheElementsIsInvalidArgument) {
  const OpDef* def = OpRegistry::Default().Find("nonzero");
  ASSERT_NE(def, nullptr);
  absl::StatusOr<TensorType> t =
      def->infer_type({TensorType{DType::kBool, {2, 2}}}, NonZeroAttrs{5});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  t = def->infer_type({TensorType{DType::kBool, {}}}, NonZeroAttrs{1});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (TensorType{DType::kInt64, {1, 1}}));
}

// unique's output `output` over constant `x` (float, `shape`).
absl::StatusOr<std::vector<double>> FoldedUnique(const std::vector<float>& x,
                                                 const std::vector<int64_t>& shape,
                                                 std::optional<int64_t> axis, bool sorted,
                                                 int64_t output) {
  Graph g;
  g.AddInput("unused", {DType::kFloat32, {1}});
  auto data = testing::FloatValues(shape, x);
  UniqueAttrs a{axis, sorted, output, CountUnique(*data, axis)};
  g.AddOutput(testing::Op(g, "unique", {g.AddConstant("x", data)}, a));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  if (!p.ok()) return p.status();
  const ValueSpec& out = p->program.values[p->program.outputs[0]];
  if (out.kind != ValueSpec::Kind::kConstant) return absl::InternalError("not folded");
  std::vector<double> v;
  for (int64_t k = 0; k < out.type.NumElements(); ++k) {
    v.push_back(ReadElementAsDouble(out.type.dtype, out.constant->bytes.data(), k));
  }
  return v;
}

TEST(ValueShapeOpsTest, UniqueOfElementsInBothOrders) {
  // ONNX's own example: [2, 1, 1, 3, 4, 3].
  const std::vector<float> x = {2, 1, 1, 3, 4, 3};
  const std::vector<std::vector<double>> first_seen = {
      {2, 1, 3, 4}, {0, 1, 3, 4}, {0, 1, 1, 2, 3, 2}, {1, 2, 2, 1}};
  const std::vector<std::vector<double>> sorted = {
      {1, 2, 3, 4}, {1, 0, 3, 4}, {1, 0, 0, 2, 3, 2}, {2, 1, 2, 1}};
  for (int64_t output = 0; output < 4; ++output) {
    SCOPED_TRACE(output);
    absl::StatusOr<std::vector<double>> v = FoldedUnique(x, {6}, std::nullopt, false, output);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_THAT(*v, ElementsAreArray(first_seen[output]));
    v = FoldedUnique(x, {6}, std::nullopt, true, output);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_THAT(*v, ElementsAreArray(sorted[output]));
  }
}

TEST(ValueShapeOpsTest, UniqueColumnsCompareLexicographically) {
  // Columns of [[1, 0, 1, 0], [5, 2, 5, 1]]: (1,5) (0,2) (1,5) (0,1).
  const std::vector<float> x = {1, 0, 1, 0, 5, 2, 5, 1};
  absl::StatusOr<std::vector<double>> y = FoldedUnique(x, {2, 4}, 1, true, 0);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(0, 0, 1, 1, 2, 5));  // columns (0,1) (0,2) (1,5)
  absl::StatusOr<std::vector<double>> inverse = FoldedUnique(x, {2, 4}, 1, true, 2);
  ASSERT_TRUE(inverse.ok()) << inverse.status();
  EXPECT_THAT(*inverse, ElementsAre(2, 1, 2, 0));
}

TEST(ValueShapeOpsTest, UniqueCollapsesNaNsAfterEveryNumber) {
  // np.unique([nan, 1, nan, -2], return_counts=True): [-2, 1, nan], [1, 1, 2].
  const std::vector<float> x = {NAN, 1, NAN, -2};
  absl::StatusOr<std::vector<double>> y = FoldedUnique(x, {4}, std::nullopt, true, 0);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->size(), 3u);
  EXPECT_EQ((*y)[0], -2);
  EXPECT_EQ((*y)[1], 1);
  EXPECT_TRUE(std::isnan((*y)[2]));
  absl::StatusOr<std::vector<double>> counts = FoldedUnique(x, {4}, std::nullopt, true, 3);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, ElementsAre(1, 1, 2));
}

TEST(ValueShapeOpsTest, UniqueOverARunTimeInputIsUnimplemented) {
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {4}});
  g.AddOutput(testing::Op(g, "unique", {in}, UniqueAttrs{std::nullopt, true, 0, 2}));
  absl::StatusOr<LoweredProgram> p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented) << p.status();
}

}  // namespace
}  // namespace kiln
