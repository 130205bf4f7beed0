// Reductions over the outer dims of a tensor whose innermost dim x is kept:
// RowAccumulated's row of accumulators along x (row_reduction.cc). A row of
// at most four vectors runs as vector values kept in registers, a longer one
// as LLVM-vectorised loops over a row in memory; both against a float64
// reference, for each reduction and for rows that are not whole vectors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/compile.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::lower {
namespace {

using engine::ModelManager;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;

// `op` over axes 1 and 2 of x[n][h][w][lanes], in float64.
std::vector<float> Reference(const std::string& op, const std::vector<float>& x, int64_t n,
                             int64_t plane, int64_t lanes) {
  std::vector<float> y(n * lanes);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t l = 0; l < lanes; ++l) {
      double acc = op == "max"    ? -std::numeric_limits<double>::infinity()
                   : op == "min"  ? std::numeric_limits<double>::infinity()
                   : op == "prod" ? 1.0
                                  : 0.0;
      for (int64_t p = 0; p < plane; ++p) {
        const double v = x[(b * plane + p) * lanes + l];
        if (op == "max") {
          acc = std::max(acc, v);
        } else if (op == "min") {
          acc = std::min(acc, v);
        } else if (op == "prod") {
          acc *= v;
        } else {
          acc += v;
        }
      }
      y[b * lanes + l] = static_cast<float>(op == "mean" ? acc / plane : acc);
    }
  }
  return y;
}

Graph ReduceOuterDims(const std::string& op, int64_t n, int64_t h, int64_t w, int64_t lanes) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {n, h, w, lanes}});
  g.AddOutput(Op(g, op, {x}, ReduceAttrs{{1, 2}, true}));
  return g;
}

// Rows of 8 to 64 lanes run as vector values; 24 is not a power of two,
// 72 and 80 are past four vectors and keep the loops.
TEST(RowReductionTest, EveryReductionMatchesTheReferenceAtEveryRowLength) {
  auto manager = ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const int64_t n = 2, h = 5, w = 7;
  for (const std::string op : {"sum", "mean", "max", "min", "prod"}) {
    for (int64_t lanes : {8, 16, 24, 48, 64, 72, 80}) {
      SCOPED_TRACE(absl::StrCat(op, " over rows of ", lanes));
      std::vector<float> x = Pseudorandom(n * h * w * lanes, 7 + lanes);
      // Factors near 1 keep a product of 35 of them near 1.
      if (op == "prod") {
        for (float& v : x) v = 1.0f + 0.1f * v;
      }
      auto compiled = (*manager)->Compile("r", ReduceOuterDims(op, n, h, w, lanes), {});
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      auto input = Tensor::FromBytes(
          {DType::kFloat32, {n, h, w, lanes}},
          absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
      ASSERT_TRUE(input.ok());
      auto result = (*manager)->Find("r")->Run({&*input});
      ASSERT_TRUE(result.ok()) << result.status();
      const std::vector<float> want = Reference(op, x, n, h * w, lanes);
      const Tensor& out = result->outputs[0];
      ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.size()));
      const float* got = static_cast<const float*>(out.data());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
      }
    }
  }
}

// The loop nest and the optimised LLVM IR of the kernel for `lanes`.
std::pair<std::string, std::string> Kernel(int64_t lanes) {
  auto program = CompileGraph(ReduceOuterDims("sum", 3, 14, 14, lanes), {});
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok() || program->kernels.size() != 1) return {};
  const LoopFunction& fn = program->kernels[0].function;
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  EXPECT_TRUE(ir.ok()) << ir.status();
  return {LoopFunctionToString(fn), ir.ok() ? *ir : ""};
}

// A blocked global average pool's shape (16 lanes over a 14 x 14 plane):
// the row is one vector value, and no float array is left on the stack for
// the accumulators to round-trip through. A row of 80 lanes stays a row in
// memory under vectorised loops.
TEST(RowReductionTest, RowsOfAFewVectorsKeepTheirAccumulatorsInRegisters) {
  const auto [nest16, ir16] = Kernel(16);
  EXPECT_THAT(nest16, ::testing::HasSubstr("vector for"));
  EXPECT_THAT(nest16, ::testing::Not(::testing::HasSubstr("vectorized for")));
  EXPECT_THAT(ir16, ::testing::Not(::testing::HasSubstr("x float], align")));

  const auto [nest80, ir80] = Kernel(80);
  EXPECT_THAT(nest80, ::testing::HasSubstr("vectorized for"));
  EXPECT_THAT(nest80, ::testing::Not(::testing::HasSubstr("vector for")));
}

}  // namespace
}  // namespace kiln::lower
