// One-pool ONNX models (max and average; odd planes, 1 x N, padding, ceil_mode,
// dilation, count_include_pad; stride 1 and 2) compiled and compared with
// NumPy (data/make_pool_fixtures.py): max pools and stride-1 average pools
// through pool_planes.cc's passes (with a flat column pass where W == sx *
// OW, row by row where not), stride-2 average pools row by row. Also which
// schedule a stride-1 pool takes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/driver/compile.h"
#include "compiler/frontend/onnx_importer.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/ops/op_registry.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln {
namespace {

const char kData[] = "tests/compiler/lower/data/pool_";

testing::NpyFloat32 ReadNpy(const std::string& name) {
  absl::StatusOr<testing::NpyFloat32> npy = testing::ReadNpyFloat32(kData + name + ".npy");
  EXPECT_TRUE(npy.ok()) << npy.status();
  return npy.ok() ? *std::move(npy) : testing::NpyFloat32{};
}

absl::StatusOr<Graph> ImportCase(const std::string& name) {
  std::ifstream in(kData + name + ".onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return ImportOnnxModel(bytes.str(), OpRegistry::Default(), {});
}

class PoolNumericsTest : public ::testing::TestWithParam<const char*> {};

// Within 1e-5 of NumPy's float64 result, relative to max(1, |value|); with
// and without the loop passes that partition the edge rows' loops.
TEST_P(PoolNumericsTest, MatchesNumPy) {
  const std::string name = GetParam();
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const testing::NpyFloat32 x = ReadNpy(name + "_x"), want = ReadNpy(name + "_y");
  for (const char* disabled : {"", "PartitionBoundaryLoops"}) {
    SCOPED_TRACE(std::string("disabled: ") + disabled);
    auto graph = ImportCase(name);
    ASSERT_TRUE(graph.ok()) << graph.status();
    CompileOptions options;
    if (*disabled) options.disabled_passes = {disabled};
    const std::string model = name + disabled;
    auto compiled = (*manager)->Compile(model, *std::move(graph), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto input = runtime::Tensor::FromBytes({DType::kFloat32, x.shape}, x.bytes());
    ASSERT_TRUE(input.ok()) << input.status();
    auto result = (*manager)->Find(model)->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const runtime::Tensor& out = result->outputs[0];
    EXPECT_EQ(out.type().shape, want.shape);
    ASSERT_EQ(out.type().NumElements(), static_cast<int64_t>(want.values.size()));
    const float* got = static_cast<const float*>(out.data());
    for (size_t i = 0; i < want.values.size(); ++i) {
      ASSERT_NEAR(got[i], want.values[i], 1e-5 * std::max(1.0f, std::fabs(want.values[i])))
          << name << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PoolNumericsTest,
                         ::testing::Values("max3_p1_14x14", "max3_p1_7x7", "max3_p1_13x11_b2",
                                           "max3_p1_ceil_13x11", "max1x5_p2_1x37",
                                           "max3_d2_p2_15x17", "max2_p01_9x10", "max5_p2_12x12",
                                           "max3_p1_3x40", "avg3_p1_13x11", "avg3_p1_incl_13x11",
                                           "avg3_p1_14x14", "max3_p0_13x11", "max3_s2_ceil_28x28",
                                           "max3_s2_p1_25x23", "max2_s2_ceil_7x7",
                                           "avg3_s2_p1_incl_ceil_14x13"));

// uint8 max pools (stride 1 and 2, padding 1) take the separable form too,
// its row maxima held as int64: checked against a plain loop over the window.
TEST(PoolNumericsTest, Uint8MaxPoolMatchesAPlainLoop) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const int64_t c = 3, h = 15, w = 14;
  std::string bytes(c * h * w, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 97 + 13) % 251);
  for (int64_t s : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("stride ", s));
    Graph g;
    Node* in = g.AddInput("x", {DType::kUInt8, {1, c, h, w}});
    Pool2DAttrs attrs;
    attrs.kernel = {3, 3};
    attrs.strides = {s, s};
    attrs.padding = {1, 1, 1, 1};
    g.AddOutput(testing::Op(g, "max_pool2d", {in}, attrs));
    const std::string model = absl::StrCat("u8_pool_", s);
    auto compiled = (*manager)->Compile(model, std::move(g), {});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto input = runtime::Tensor::FromBytes({DType::kUInt8, {1, c, h, w}}, bytes);
    ASSERT_TRUE(input.ok()) << input.status();
    auto result = (*manager)->Find(model)->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const int64_t oh = (h + 2 - 3) / s + 1, ow = (w + 2 - 3) / s + 1;
    ASSERT_EQ(result->outputs[0].type().shape, (std::vector<int64_t>{1, c, oh, ow}));
    const uint8_t* got = static_cast<const uint8_t*>(result->outputs[0].data());
    const uint8_t* x = reinterpret_cast<const uint8_t*>(bytes.data());
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          int want = -1;
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = y * s - 1 + ky, ix = xo * s - 1 + kx;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                want = std::max<int>(want, x[(ci * h + iy) * w + ix]);
              }
            }
          }
          ASSERT_EQ(got[(ci * oh + y) * ow + xo], want) << ci << " " << y << " " << xo;
        }
      }
    }
  }
}

// The one kernel of a 3x3 stride-1 pool with padding 1 over `shape`.
lower::LoopFunction PoolKernel(const char* op, const std::vector<int64_t>& shape) {
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, shape});
  Pool2DAttrs attrs;
  attrs.kernel = {3, 3};
  attrs.padding = {1, 1, 1, 1};
  g.AddOutput(testing::Op(g, op, {in}, attrs));
  auto program = CompileGraph(std::move(g), {});
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok() || program->kernels.size() != 1) return {};
  return program->kernels[0].function;
}

// googlenet's inception branch pool: the row maxima of a plane go to one
// stack buffer of the plane's size, read back for the column maxima.
TEST(PoolOverPlanesTest, StrideOneMaxPoolIsSeparable) {
  const lower::LoopFunction fn = PoolKernel("max_pool2d", {1, 512, 14, 14});
  const std::string nest = lower::LoopFunctionToString(fn);
  ASSERT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params) + 1) << nest;
  EXPECT_TRUE(fn.buffers.back().local);
  EXPECT_EQ(fn.buffers.back().num_elements, 14 * 14);
}

// An average pool keeps its window whole: the interior of each plane is one
// flat loop (positions (1, 1) to (12, 12) of a 14-wide plane: 166, in ten
// 16-lane blocks and one more ending at the last), no temporary.
TEST(PoolOverPlanesTest, StrideOneAveragePoolRunsTheInteriorFlat) {
  const lower::LoopFunction fn = PoolKernel("avg_pool2d", {1, 8, 14, 14});
  const std::string nest = lower::LoopFunctionToString(fn);
  EXPECT_EQ(fn.buffers.size(), static_cast<size_t>(fn.num_params)) << nest;
  EXPECT_THAT(nest, ::testing::HasSubstr("in [0, 160)"));
  EXPECT_THAT(nest, ::testing::HasSubstr("in [0, 16)"));
}

}  // namespace
}  // namespace kiln
