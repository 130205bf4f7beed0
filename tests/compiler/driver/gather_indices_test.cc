// Gather's indices out of range are an error, never a clamped or
// out-of-bounds read (issue 20): constants at compile time, indices the
// program holds (a model input) before the kernel that reads them runs.
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/model_manager.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Int64Values;
using ::kiln::testing::Op;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using runtime::Tensor;

// data = [[0, 1], [10, 11], [20, 21]]: gather along axis 0 picks rows.
Node* Data(Graph& g) { return g.AddConstant("data", FloatValues({3, 2}, {0, 1, 10, 11, 20, 21})); }

class GatherIndicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void ExpectInputIndicesChecked(bool kernel_bounds_checks);
  std::unique_ptr<engine::ModelManager> manager_;
};

TEST_F(GatherIndicesTest, ConstantIndicesOutOfRangeAreInvalidArgumentAtCompileTime) {
  for (int64_t bad : {int64_t{3}, int64_t{-4}, int64_t{1} << 40}) {
    SCOPED_TRACE(bad);
    Graph g;
    g.AddInput("x", {DType::kFloat32, {1}});
    g.AddOutput(Op(g, "gather", {Data(g), g.AddConstant("i", Int64Values({2}, {0, bad}))},
                   AxisAttrs{0}));
    absl::Status s = manager_->Compile("bad", std::move(g), CompileOptions{}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("outside [-3, 3)"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("gather"));
  }
}

TEST_F(GatherIndicesTest, InputIndicesOutOfRangeAreAnErrorAndTheModelKeepsServing) {
  for (bool checks : {false, true}) {
    SCOPED_TRACE(checks ? "bounds-checked kernels" : "unchecked kernels");
    ExpectInputIndicesChecked(checks);
  }
}

// With kernel bounds checks as well, the runtime's check still comes first
// (InvalidArgument, before any kernel runs) and valid rows are the same.
void GatherIndicesTest::ExpectInputIndicesChecked(bool kernel_bounds_checks) {
  Graph g;
  Node* indices = g.AddInput("i", {DType::kInt64, {2}});
  g.AddOutput(Op(g, "gather", {Data(g), indices}, AxisAttrs{0}));
  CompileOptions options;
  options.kernel_bounds_checks = kernel_bounds_checks;
  const std::string name = kernel_bounds_checks ? "gather_checked" : "gather";
  absl::StatusOr<engine::CompileResult> compiled = manager_->Compile(name, std::move(g), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  int cached = 0;
  for (const engine::KernelInfo& k : manager_->GetCacheStats().entries) {
    if (k.key_hex != compiled->kernels[0].key_hex) continue;
    EXPECT_EQ(k.options, kernel_bounds_checks ? "O3 bounds-checked" : "O3");
    ++cached;
  }
  EXPECT_EQ(cached, 1);
  auto run = [&](std::vector<int64_t> i) {
    absl::StatusOr<Tensor> t =
        Tensor::FromBytes({DType::kInt64, {2}},
                          absl::string_view(reinterpret_cast<const char*>(i.data()), 16));
    EXPECT_TRUE(t.ok());
    return manager_->Find(name)->Run({&*t});
  };
  for (int64_t bad : {int64_t{3}, int64_t{-4}, int64_t{1} << 40}) {
    absl::StatusOr<runtime::RunResult> r = run({1, bad});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("outside [-3, 3)"));
  }
  absl::StatusOr<runtime::RunResult> r = run({2, -3});  // -3 is row 0
  ASSERT_TRUE(r.ok()) << r.status();
  const float* out = static_cast<const float*>(r->outputs[0].data());
  EXPECT_THAT(std::vector<float>(out, out + 4), ElementsAre(20, 21, 0, 1));
}

}  // namespace
}  // namespace kiln
