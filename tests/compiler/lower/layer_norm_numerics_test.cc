// LayerNorm fed by a residual add, as ONNX writes it (opset 17's
// LayerNormalization and PyTorch's decomposed export), compiled to one kernel
// holding both row reductions (fuse_ops.cc's row pair, lower_group.cc's
// RowStages) and compared with NumPy (data/make_layer_norm_fixtures.py).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;

const char kData[] = "tests/compiler/lower/data/";

struct CaseRun {
  std::vector<float> output;
  std::vector<std::vector<std::string>> kernel_ops;
};

testing::NpyFloat32 ReadNpy(const std::string& name) {
  absl::StatusOr<testing::NpyFloat32> npy = testing::ReadNpyFloat32(kData + name + ".npy");
  EXPECT_TRUE(npy.ok()) << npy.status();
  return npy.ok() ? *std::move(npy) : testing::NpyFloat32{};
}

// Imports NAME.onnx, compiles it at `opt_level` and runs it on NAME_x, NAME_r.
CaseRun RunCase(const std::string& name, int opt_level) {
  std::ifstream in(kData + name + ".onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto graph = ImportOnnxModel(bytes.str(), OpRegistry::Default(), {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return {};
  auto manager = engine::ModelManager::Create({});
  EXPECT_TRUE(manager.ok()) << manager.status();
  CompileOptions options;
  options.opt_level = opt_level;
  auto compiled = (*manager)->Compile(name, *std::move(graph), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  CaseRun run;
  for (const engine::KernelCompileReport& k : compiled->kernels) run.kernel_ops.push_back(k.ops);
  const testing::NpyFloat32 x = ReadNpy(name + "_x"), r = ReadNpy(name + "_r");
  auto x_tensor = runtime::Tensor::FromBytes({DType::kFloat32, x.shape}, x.bytes());
  auto r_tensor = runtime::Tensor::FromBytes({DType::kFloat32, r.shape}, r.bytes());
  EXPECT_TRUE(x_tensor.ok() && r_tensor.ok());
  if (!x_tensor.ok() || !r_tensor.ok()) return {};
  auto result = (*manager)->Find(name)->Run({&*x_tensor, &*r_tensor});
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const runtime::Tensor& out = result->outputs[0];
  const float* p = static_cast<const float*>(out.data());
  run.output.assign(p, p + out.type().NumElements());
  return run;
}

// Within 1e-4 of NumPy's float64 result, relative to max(1, |value|).
void ExpectMatchesNumPy(const std::string& name, const std::vector<float>& got) {
  const testing::NpyFloat32 want = ReadNpy(name + "_y");
  ASSERT_EQ(got.size(), want.values.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want.values[i], 1e-4 * std::max(1.0f, std::fabs(want.values[i])))
        << name << " at " << i;
  }
}

class LayerNormNumericsTest : public ::testing::TestWithParam<const char*> {};

// Fused (the default opt level) and unfused (0: one kernel per op) both
// match NumPy, and the fused compile is the one kernel.
TEST_P(LayerNormNumericsTest, OneKernelMatchesNumPy) {
  const std::string name = GetParam();
  const CaseRun fused = RunCase(name, 2);
  ExpectMatchesNumPy(name, fused.output);
  ASSERT_EQ(fused.kernel_ops.size(), 1u) << name;
  EXPECT_EQ(fused.kernel_ops[0].front(), "add") << "the residual add leads the kernel";
  EXPECT_EQ(std::count(fused.kernel_ops[0].begin(), fused.kernel_ops[0].end(), "mean"), 2);
  const CaseRun unfused = RunCase(name, 0);
  EXPECT_GT(unfused.kernel_ops.size(), 5u);
  ExpectMatchesNumPy(name, unfused.output);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LayerNormNumericsTest,
                         ::testing::Values("ln17_rows256", "ln17_rows768", "ln17_rows37_scale_only",
                                           "ln17_large_eps", "decomposed_rows256",
                                           "decomposed_rows768", "decomposed_rows37"));

TEST(LayerNormKernelTest, DecomposedPatternIsTheOpsOfOneKernelInOrder) {
  EXPECT_THAT(RunCase("decomposed_rows37", 2).kernel_ops,
              ElementsAre(ElementsAre("add", "mean", "sub", "pow", "mean", "add", "sqrt", "div",
                                      "mul", "add")));
}

}  // namespace
}  // namespace kiln
