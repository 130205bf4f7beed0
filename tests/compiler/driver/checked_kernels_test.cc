// Kernels that touch nothing outside their buffers, shown by compiling them
// with bounds checks (CompileOptions::kernel_bounds_checks: an access outside
// fails the run, naming the kernel). Each case is one the checks found when
// the ONNX node tests and the model zoo ran with them on; the values are
// worked out by hand.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/model_manager.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatConstant;
using ::kiln::testing::FloatValues;
using ::kiln::testing::Int64Values;
using ::kiln::testing::Op;
using ::testing::ElementsAre;
using runtime::Tensor;

class CheckedKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // `g` compiled with bounds checks and run on `x` (its one input).
  std::vector<float> Run(Graph g, const std::vector<float>& x) {
    CompileOptions options;
    options.kernel_bounds_checks = true;
    const TensorType type = g.inputs()[0]->type;
    absl::StatusOr<engine::CompileResult> compiled =
        manager_->Compile("model", std::move(g), options);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return {};
    absl::StatusOr<Tensor> in = Tensor::FromBytes(
        type, absl::string_view(reinterpret_cast<const char*>(x.data()), 4 * x.size()));
    EXPECT_TRUE(in.ok()) << in.status();
    absl::StatusOr<runtime::RunResult> r = manager_->Find("model")->Run({&*in});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    std::vector<float> out(r->outputs[0].byte_size() / 4);
    std::memcpy(out.data(), r->outputs[0].data(), r->outputs[0].byte_size());
    return out;
  }

  std::unique_ptr<engine::ModelManager> manager_;
};

// Rows no index tuple names keep the data; the update such a row would take
// is never loaded (it was, from before the start of the updates).
TEST_F(CheckedKernelsTest, ScatterNdRowsWithoutAnUpdateKeepTheData) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 2}});
  Node* indices = g.AddConstant("indices", Int64Values({2, 1}, {2, 0}));
  Node* updates = g.AddConstant("updates", FloatValues({2, 2}, {10, 11, 12, 13}));
  g.AddOutput(Op(g, "scatter_nd", {x, indices, updates}, ScatterAttrs{}));
  EXPECT_THAT(Run(std::move(g), {0, 1, 2, 3, 4, 5, 6, 7}),
              ElementsAre(12, 13, 2, 3, 10, 11, 6, 7));
}

// GlobalAveragePool as ONNX imports it (sum over H and W, times 1 / (H W))
// over 440 channels: the vector loop over channels ends in a block of 8
// lanes out of 16, whose idle lanes' sums were still computed, reading past
// the input (regnet_y_400mf's squeeze-excitation).
TEST_F(CheckedKernelsTest, AveragePoolOverChannelsEndingInAPartialVectorBlock) {
  const int64_t channels = 440;
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, channels, 2, 2}});
  Node* sum = Op(g, "sum", {x}, ReduceAttrs{{2, 3}, true});
  g.AddOutput(Op(g, "mul", {sum, g.AddConstant("scale", FloatConstant({}, 0.25f))}));
  std::vector<float> in(channels * 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 13);
  std::vector<float> out = Run(std::move(g), in);
  ASSERT_EQ(out.size(), static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float want = (in[4 * c] + in[4 * c + 1] + in[4 * c + 2] + in[4 * c + 3]) * 0.25f;
    ASSERT_EQ(out[c], want) << c;
  }
}

}  // namespace
}  // namespace kiln
