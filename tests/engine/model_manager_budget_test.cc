// The loaded-model budget through ModelManager: each model and shape
// variant is charged what it holds (weights, planned arena, code) until it
// is gone; a load that does not fit unloads the least recently used shape
// variants nothing holds (never one a call runs on, never a model itself)
// and is otherwise ResourceExhausted naming --max-loaded-mb, before any of
// its kernels compile; the models already loaded keep computing.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir/verifier.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/symbolic_batch_model.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using ::testing::HasSubstr;
using runtime::Tensor;

std::unique_ptr<ModelManager> Manager(int64_t max_loaded_bytes,
                                      std::vector<VariantUnloaded>* unloaded = nullptr) {
  ModelManagerOptions options;
  options.cache.dir.clear();
  options.max_loaded_bytes = max_loaded_bytes;
  if (unloaded != nullptr) {
    options.on_variant_unloaded = [unloaded](const VariantUnloaded& u) { unloaded->push_back(u); };
  }
  auto m = ModelManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// relu(x @ w.T + b), x: [2, kDense], w: [kDense, kDense] (seeded by `seed`):
// 256 KiB of weights, far more than its code.
constexpr int64_t kDense = 256;
Graph DenseGraph(uint32_t seed) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {2, kDense}});
  Node* w = g.AddConstant("w", FloatValues({kDense, kDense}, Pseudorandom(kDense * kDense, seed)));
  Node* b = g.AddConstant("b", FloatValues({kDense}, Pseudorandom(kDense, seed + 1)));
  g.AddOutput(Op(g, "relu", {Op(g, "dense", {x, w, b})}));
  return g;
}

// Runs DenseGraph(seed) loaded as `name` and compares with the plain loops.
void ExpectDenseComputes(ModelManager& manager, const std::string& name, uint32_t seed) {
  SCOPED_TRACE(name);
  std::shared_ptr<runtime::CompiledModel> model = manager.Find(name);
  ASSERT_NE(model, nullptr);
  std::vector<float> x = Pseudorandom(2 * kDense, 99);
  auto input = Tensor::FromBytes({DType::kFloat32, {2, kDense}},
                                 absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                   x.size() * sizeof(float)));
  ASSERT_TRUE(input.ok());
  auto result = model->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<float> want = testing::RefRelu(testing::RefDense(
      x, Pseudorandom(kDense * kDense, seed), Pseudorandom(kDense, seed + 1), 2, kDense, kDense));
  const float* got = static_cast<const float*>(result->outputs[0].data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

TEST(ModelManagerBudgetTest, AModelIsChargedItsWeightsArenaAndCodeUntilUnloaded) {
  std::unique_ptr<ModelManager> manager = Manager(int64_t{1} << 30);
  // exp(neg(x) + c), unfused: two intermediates alive together.
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {64}});
  Node* c = g.AddConstant("c", FloatValues({64}, Pseudorandom(64, 3)));
  g.AddOutput(Op(g, "exp", {Op(g, "add", {Op(g, "neg", {x}), c})}));
  CompileOptions unfused;
  unfused.disabled_passes = {"FuseOps"};
  auto r = manager->Compile("chain", std::move(g), unfused);
  ASSERT_TRUE(r.ok()) << r.status();
  const runtime::ModelFootprint& f = r->footprint;
  EXPECT_EQ(f.constant_bytes, 64 * 4);
  EXPECT_EQ(f.arena_bytes, r->intermediate_bytes);
  EXPECT_EQ(f.arena_bytes, 2 * 64 * 4);
  EXPECT_GT(f.code_bytes, 0);
  EXPECT_EQ(manager->budget().used_bytes(), f.held_bytes());
  ModelMemory memory = MemoryOf(*manager->Get("chain"));
  EXPECT_EQ(memory.total_bytes(), f.held_bytes());
  EXPECT_EQ(memory.variants, 1);
  ASSERT_TRUE(manager->Unload("chain").ok());
  EXPECT_EQ(manager->budget().used_bytes(), 0);
}

TEST(ModelManagerBudgetTest, AModelThatDoesNotFitIsRefusedBeforeItsKernelsCompile) {
  // Room for one dense model and a little more, not two: the second is
  // refused on its weights, before its kernels compile (code is charged
  // once linked).
  int64_t one = 0;
  {
    std::unique_ptr<ModelManager> probe = Manager(int64_t{1} << 30);
    auto r = probe->Compile("a", DenseGraph(1), CompileOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    one = r->footprint.held_bytes();
  }
  std::unique_ptr<ModelManager> manager = Manager(one + one / 2);
  ASSERT_TRUE(manager->Compile("a", DenseGraph(1), CompileOptions{}).ok());
  const int64_t compiles = manager->GetCacheStats().compiles;
  // Another model: a softmax of the dense, kernels the cache has not seen.
  Graph b = DenseGraph(5);
  Node* out = b.outputs()[0];
  b.SetOutput(0, Op(b, "softmax", {out}, AxisAttrs{-1}));
  absl::Status s = manager->Compile("b", std::move(b), CompileOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model 'b'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-loaded-mb"));
  EXPECT_FALSE(s.GetPayload(kLimitPayload).has_value());  // it would fit an emptier server
  EXPECT_EQ(manager->GetCacheStats().compiles, compiles);  // no kernel was compiled for it
  EXPECT_FALSE(manager->Get("b").has_value());
  ExpectDenseComputes(*manager, "a", 1);  // the model loaded first is untouched
  EXPECT_EQ(manager->budget().used_bytes(), one);
}

TEST(ModelManagerBudgetTest, AValueLargerThanTheBudgetIsRefusedBeforeAnyKernelCompiles) {
  std::unique_ptr<ModelManager> manager = Manager(int64_t{1} << 20);
  auto expand_to = [](std::vector<int64_t> shape) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {1, shape[1]}});
    g.AddOutput(Op(g, "expand", {x}, ReshapeAttrs{shape}), "y");
    return g;
  };
  // 4 MiB: within what the runtime allocates, not within this budget.
  absl::Status s =
      manager->Compile("wide", expand_to({1024, 1024}), CompileOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("value 'y' (float32[1024,1024]) alone needs 4.0 MiB, more than the "
                        "server's whole budget of 1.0 MiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-loaded-mb"));
  EXPECT_EQ(s.GetPayload(kLimitPayload), absl::Cord(kMaxLoadedLimitName));
  // 128 GiB: past the runtime's own limit, budget or none.
  std::unique_ptr<ModelManager> unbounded = Manager(std::numeric_limits<int64_t>::max());
  for (ModelManager* m : {manager.get(), unbounded.get()}) {
    s = m->Compile("huge", expand_to({int64_t{1} << 20, int64_t{1} << 15}), CompileOptions{})
            .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(s.message()), HasSubstr("value 'y' (float32[1048576,32768])"));
    EXPECT_EQ(m->GetCacheStats().compiles, 0);
    EXPECT_EQ(m->budget().used_bytes(), 0);
  }
}

// Shape variants of y = relu(x) * 2, x: [batch, 24]; the footprint of each
// batch measured on an unbounded manager first, so that the budget below
// holds batch 1 (the load-time shape), 2 and one more, not two more.
class VariantBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<ModelManager> probe = Manager(std::numeric_limits<int64_t>::max());
    ASSERT_TRUE(Load(*probe).ok());
    for (int64_t batch = 1; batch <= 5; ++batch) {
      auto model = probe->FindForShapes("m", {{batch, kWidth}});
      ASSERT_TRUE(model.ok()) << model.status();
      bytes_[batch] = (*model)->footprint().held_bytes();
    }
    const int64_t one_more = *std::max_element(bytes_ + 3, bytes_ + 6);
    ASSERT_LT(one_more, std::min({bytes_[3], bytes_[4], bytes_[5]}) * 2);
    manager_ = Manager(bytes_[1] + bytes_[2] + one_more, &unloaded_);
    ASSERT_TRUE(Load(*manager_).ok());
  }

  absl::Status Load(ModelManager& manager) {
    ShapeBinding first{{"x", {1, kWidth}}};
    absl::StatusOr<Graph> g = BatchModelGraph(first, nullptr);
    if (!g.ok()) return g.status();
    SymbolicModel symbolic;
    symbolic.signature = BatchModelSignature(/*two_inputs=*/false);
    symbolic.graph_for = [this](const ShapeBinding& s, const ValueBinding&) {
      return BatchModelGraph(s, &builds_);
    };
    symbolic.pad_new_batches = false;
    return manager.CompileWithShapes("m", *std::move(g), std::move(symbolic), CompileOptions{})
        .status();
  }

  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> Get(int64_t batch) {
    return manager_->FindForShapes("m", {{batch, kWidth}});
  }

  // Runs `model` at `batch` rows and checks relu(x) * 2.
  static void ExpectComputes(runtime::CompiledModel& model, int64_t batch) {
    SCOPED_TRACE(batch);
    std::vector<float> x = Pseudorandom(batch * kWidth, static_cast<uint32_t>(batch));
    auto input = Tensor::FromBytes({DType::kFloat32, {batch, kWidth}},
                                   absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                     x.size() * sizeof(float)));
    ASSERT_TRUE(input.ok());
    auto result = model.Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const float* y = static_cast<const float*>(result->outputs[0].data());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::max(0.0f, x[i]) * 2) << i;
  }

  std::vector<VariantKey> LoadedKeys() {
    std::vector<VariantKey> keys;
    for (const auto& [key, model] : manager_->Get("m")->variants->Loaded()) keys.push_back(key);
    return keys;
  }

  int64_t bytes_[6] = {};
  std::unique_ptr<ModelManager> manager_;
  std::vector<VariantUnloaded> unloaded_;
  std::atomic<int> builds_{0};
};

TEST_F(VariantBudgetTest, TheLeastRecentlyUsedIdleVariantMakesRoomNeverOneInUse) {
  ASSERT_TRUE(Get(3).ok());
  auto held = Get(2);  // a call running on batch 2, which is now the more recent
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(manager_->budget().used_bytes(), bytes_[1] + bytes_[2] + bytes_[3]);
  // Batch 4 does not fit beside 1, 2 and 3: 3 goes (1 is the model's own,
  // 2 is in use though older in the set).
  auto four = Get(4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(LoadedKeys(), (std::vector<VariantKey>{{{1, kWidth}}, {{2, kWidth}}, {{4, kWidth}}}));
  ASSERT_EQ(unloaded_.size(), 1u);
  EXPECT_EQ(unloaded_[0].model, "m");
  EXPECT_EQ(unloaded_[0].shapes, "x=[3,24]");
  EXPECT_EQ(unloaded_[0].bytes, bytes_[3]);
  EXPECT_THAT(unloaded_[0].for_what, HasSubstr("shape x=[4,24] of model 'm'"));
  EXPECT_EQ(manager_->budget().used_bytes(), bytes_[1] + bytes_[2] + bytes_[4]);
  EXPECT_EQ(manager_->budget().unloads(), 1);

  // With 4 in use too, nothing can go: batch 5 is refused, naming the flag,
  // and is not remembered as failing (the budget was only busy).
  const int builds = builds_.load();
  absl::Status busy = Get(5).status();
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(busy.message()), HasSubstr("--max-loaded-mb"));
  EXPECT_EQ(builds_.load(), builds + 1);
  ExpectComputes(**held, 2);  // what runs is left alone
  ExpectComputes(**four, 4);
  ExpectComputes(*manager_->Find("m"), 1);

  held->reset();  // batch 2's call returns: 2 is now the coldest idle one
  auto five = Get(5);
  ASSERT_TRUE(five.ok()) << five.status();
  ExpectComputes(**five, 5);
  ASSERT_EQ(unloaded_.size(), 2u);
  EXPECT_EQ(unloaded_[1].shapes, "x=[2,24]");
  EXPECT_EQ(LoadedKeys(), (std::vector<VariantKey>{{{1, kWidth}}, {{4, kWidth}}, {{5, kWidth}}}));
  four->reset();
  auto two = Get(2);  // compiled again: 4 (idle now) makes room, 5 is in use
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectComputes(**two, 2);
  EXPECT_EQ(unloaded_.back().shapes, "x=[4,24]");
}

TEST_F(VariantBudgetTest, AVariantLargerThanTheWholeBudgetFailsForGood) {
  const int builds = builds_.load();
  for (int i = 0; i < 2; ++i) {
    absl::Status s = Get(100000).status();  // a 9.2 MiB input
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(s.message()), HasSubstr("whole budget"));
  }
  EXPECT_EQ(builds_.load(), builds + 1);  // not imported and lowered again per request
  EXPECT_TRUE(unloaded_.empty());
  ExpectComputes(*manager_->Find("m"), 1);
}

TEST(ModelManagerBudgetTest, ASymbolicModelsSourceIsChargedWhileItIsLoaded) {
  std::unique_ptr<ModelManager> manager = Manager(int64_t{1} << 30);
  SymbolicModel symbolic;
  symbolic.signature = BatchModelSignature(/*two_inputs=*/false);
  symbolic.graph_for = [](const ShapeBinding& s, const ValueBinding&) {
    return BatchModelGraph(s, nullptr);
  };
  symbolic.source_bytes = 12345;
  absl::StatusOr<Graph> g = BatchModelGraph({{"x", {1, kWidth}}}, nullptr);
  ASSERT_TRUE(g.ok());
  auto r = manager->CompileWithShapes("m", *std::move(g), std::move(symbolic), CompileOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  ModelMemory memory = MemoryOf(*manager->Get("m"));
  EXPECT_EQ(memory.source_bytes, 12345);
  EXPECT_EQ(memory.total_bytes(), r->footprint.held_bytes() + 12345);
  EXPECT_EQ(manager->budget().used_bytes(), memory.total_bytes());
  ASSERT_TRUE(manager->Unload("m").ok());
  EXPECT_EQ(manager->budget().used_bytes(), 0);
}

}  // namespace
}  // namespace kiln::engine
