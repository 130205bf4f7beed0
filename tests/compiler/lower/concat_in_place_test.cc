// Inception-like models (four branches joined by a concat, one branch also
// read by another kernel) compiled with the concat made in place and
// without, and compared with NumPy (data/make_concat_fixtures.py).
#include "compiler/lower/concat_in_place.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln {
namespace {

const char kData[] = "tests/compiler/lower/data/concat_";

testing::NpyFloat32 ReadNpy(const std::string& name) {
  absl::StatusOr<testing::NpyFloat32> npy = testing::ReadNpyFloat32(kData + name + ".npy");
  EXPECT_TRUE(npy.ok()) << npy.status();
  return npy.ok() ? *std::move(npy) : testing::NpyFloat32{};
}

// Within 1e-4 of NumPy's float64 result, relative to max(1, |value|).
void ExpectMatches(const runtime::Tensor& got, const testing::NpyFloat32& want,
                   const std::string& what) {
  EXPECT_EQ(got.type().shape, want.shape) << what;
  ASSERT_EQ(got.type().NumElements(), static_cast<int64_t>(want.values.size())) << what;
  const float* p = static_cast<const float*>(got.data());
  for (size_t i = 0; i < want.values.size(); ++i) {
    ASSERT_NEAR(p[i], want.values[i], 1e-4 * std::max(1.0f, std::fabs(want.values[i])))
        << what << " at " << i;
  }
}

// Compiles case `name` (with ConcatInPlace disabled when `in_place` is
// false), checks both outputs against NumPy and returns how many of its
// kernels hold a concat (and, in `blocked_convs`, how many a blocked conv).
int RunCase(const std::string& name, bool in_place, int* blocked_convs = nullptr,
            NchwcLayout layout = NchwcLayout::kAuto) {
  std::ifstream in(kData + name + ".onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto graph = ImportOnnxModel(bytes.str(), OpRegistry::Default(), {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return -1;
  auto manager = engine::ModelManager::Create({});
  EXPECT_TRUE(manager.ok()) << manager.status();
  CompileOptions options;
  if (!in_place) options.disabled_passes = {kConcatInPlaceName};
  options.nchwc_layout = layout;
  auto compiled = (*manager)->Compile(name, *std::move(graph), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return -1;
  int concats = 0;
  if (blocked_convs != nullptr) *blocked_convs = 0;
  for (const engine::KernelCompileReport& k : compiled->kernels) {
    concats += std::count(k.ops.begin(), k.ops.end(), "concat") > 0;
    if (blocked_convs != nullptr) {
      // A blocked conv, direct or by Winograd (WinogradConv).
      *blocked_convs += std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc") +
                            std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_winograd_f2") +
                            std::count(k.ops.begin(), k.ops.end(), "conv2d_nchwc_winograd_f4") >
                        0;
    }
  }
  const testing::NpyFloat32 x = ReadNpy(name + "_x");
  auto input = runtime::Tensor::FromBytes({DType::kFloat32, x.shape}, x.bytes());
  EXPECT_TRUE(input.ok()) << input.status();
  if (!input.ok()) return -1;
  // Twice: the second run reuses the first's workspace, whose slices still
  // hold the first run's values.
  for (int run = 0; run < 2; ++run) {
    auto result = (*manager)->Find(name)->Run({&*input});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return -1;
    ExpectMatches(result->outputs[0], ReadNpy(name + "_y"), name + " y");
    ExpectMatches(result->outputs[1], ReadNpy(name + "_z"), name + " z");
  }
  return concats;
}

// At batch 1 each channel slice is contiguous: the branches write into the
// concat's buffer and no kernel holds the concat; the result is NumPy's, as
// it is with the concat a kernel of its own.
TEST(ConcatInPlaceTest, BatchOneConcatHasNoKernelAndMatchesNumPy) {
  EXPECT_EQ(RunCase("b1_9x9", /*in_place=*/true), 0);
  EXPECT_EQ(RunCase("b1_9x9", /*in_place=*/false), 1);
}

// Branches of whole 16-channel blocks: the layout pass keeps the block in
// NCHW16c, the concat a concat of blocks, and at batch 1 a block of
// channels is contiguous, so the concat is still made in place. (Its kAuto
// rule leaves so small a graph NCHW: three transforms for four convs.)
TEST(ConcatInPlaceTest, BlockedConcatHasNoKernelAndMatchesNumPy) {
  int blocked_convs = 0;
  EXPECT_EQ(RunCase("b1_blocked", /*in_place=*/true, &blocked_convs, NchwcLayout::kOn), 0);
  EXPECT_EQ(blocked_convs, 4);
  EXPECT_EQ(RunCase("b1_blocked", /*in_place=*/false, &blocked_convs, NchwcLayout::kOn), 1);
  EXPECT_EQ(blocked_convs, 4);
}

// At batch 2 a channel slice is strided: the concat stays a kernel.
TEST(ConcatInPlaceTest, BatchTwoConcatStaysAKernel) {
  EXPECT_EQ(RunCase("b2_7x6", /*in_place=*/true), 1);
}

}  // namespace
}  // namespace kiln
