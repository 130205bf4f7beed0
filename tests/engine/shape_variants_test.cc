// Shapes on demand through ModelManager: a model with a symbolic batch is
// compiled per shape on first use, once however many callers ask, bounded
// by LRU, and each variant computes what a plain loop does.
#include "engine/shape_variants.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/symbolic_batch_model.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::Pseudorandom;
using ::testing::HasSubstr;
using runtime::Tensor;

class ShapeVariantsTest : public ::testing::Test {
 protected:
  absl::Status Load(bool two_inputs, int max_variants = 8, SymbolRanges ranges = {},
                    std::vector<SymbolBinding> eager = {}, int64_t load_batch = 1) {
    ModelManagerOptions options;
    options.cache.dir.clear();
    options.max_shape_variants = max_variants;
    auto m = ModelManager::Create(options);
    if (!m.ok()) return m.status();
    manager_ = *std::move(m);
    ShapeBinding first;
    for (const TensorSignature& in : BatchModelSignature(two_inputs).inputs) {
      first[in.name] = {load_batch, kWidth};
    }
    absl::StatusOr<Graph> g = BatchModelGraph(first, nullptr);
    if (!g.ok()) return g.status();
    SymbolicModel symbolic;
    symbolic.signature = BatchModelSignature(two_inputs);
    symbolic.graph_for = [this](const ShapeBinding& s, const ValueBinding&) {
      return BatchModelGraph(s, &builds_);
    };
    symbolic.ranges = std::move(ranges);
    symbolic.eager = std::move(eager);
    return manager_->CompileWithShapes("m", *std::move(g), std::move(symbolic), CompileOptions{})
        .status();
  }

  // Runs the single-input model at `batch` rows and checks relu(x) * 2.
  void ExpectComputes(int64_t batch) {
    SCOPED_TRACE(batch);
    auto model = manager_->FindForShapes("m", {{batch, kWidth}});
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<float> x = Pseudorandom(batch * kWidth, static_cast<uint32_t>(batch));
    auto input = Tensor::FromBytes({DType::kFloat32, {batch, kWidth}},
                                   absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                     x.size() * sizeof(float)));
    ASSERT_TRUE(input.ok());
    auto result = (*model)->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->outputs[0].type().shape, (std::vector<int64_t>{batch, kWidth}));
    const float* y = static_cast<const float*>(result->outputs[0].data());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::max(0.0f, x[i]) * 2) << i;
  }

  ShapeVariants& variants() { return *manager_->Get("m")->variants; }

  std::unique_ptr<ModelManager> manager_;
  std::atomic<int> builds_{0};
};

TEST_F(ShapeVariantsTest, EveryBatchComputesWhatTheLoopDoes) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  for (int64_t batch : {1, 2, 7, 32}) ExpectComputes(batch);
  EXPECT_EQ(variants().compiles(), 3);  // batch 1 was compiled at load
  ExpectComputes(7);                    // compiled already
  EXPECT_EQ(variants().compiles(), 3);
}

TEST_F(ShapeVariantsTest, AnEmptyBatchIsAVariantOfItsOwn) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  ExpectComputes(0);  // zero rows in, zero rows out (FoldEmpty: no kernel runs)
  EXPECT_EQ(variants().compiles(), 1);
  ExpectComputes(3);
}

TEST_F(ShapeVariantsTest, ConcurrentFirstRequestsCompileOnce) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  std::vector<std::thread> callers;
  std::vector<std::shared_ptr<runtime::CompiledModel>> got(8);
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([this, i, &got] {
      auto model = manager_->FindForShapes("m", {{5, kWidth}});
      if (model.ok()) got[i] = *model;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(variants().compiles(), 1);
  EXPECT_EQ(builds_.load(), 1);
  for (const auto& m : got) {
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m, got[0]);
  }
}

TEST_F(ShapeVariantsTest, LeastRecentlyUsedVariantGoesButARunningCallerKeepsIt) {
  ASSERT_TRUE(Load(/*two_inputs=*/false, /*max_variants=*/2).ok());
  auto held = manager_->FindForShapes("m", {{3, kWidth}});  // batch 1 and 3 loaded
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(manager_->FindForShapes("m", {{4, kWidth}}).ok());  // evicts batch 1
  EXPECT_EQ(variants().Loaded().size(), 2u);
  ASSERT_TRUE(manager_->FindForShapes("m", {{5, kWidth}}).ok());  // evicts batch 3
  EXPECT_EQ(variants().Loaded().size(), 2u);
  // Batch 3's model is gone from the set but still runs for its holder.
  std::vector<float> x(3 * kWidth, -1.0f);
  auto input = Tensor::FromBytes({DType::kFloat32, {3, kWidth}},
                                 absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                   x.size() * sizeof(float)));
  ASSERT_TRUE(input.ok());
  EXPECT_TRUE((*held)->Run({&*input}).ok());
  const int64_t before = variants().compiles();
  ExpectComputes(3);  // asked again: compiled again
  EXPECT_EQ(variants().compiles(), before + 1);
}

TEST_F(ShapeVariantsTest, TheColdestIdleVariantIsUnloadedAndAHeldOneNeverIs) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());  // batch 1, the model's own
  for (int64_t batch : {2, 3, 4}) ASSERT_TRUE(manager_->FindForShapes("m", {{batch, kWidth}}).ok());
  auto held = manager_->FindForShapes("m", {{2, kWidth}});  // a call running on batch 2
  ASSERT_TRUE(held.ok());
  std::optional<ShapeVariants::IdleVariant> coldest = variants().ColdestIdle();
  ASSERT_TRUE(coldest.has_value());
  EXPECT_EQ(coldest->key, (VariantKey{{3, kWidth}}));
  EXPECT_EQ(variants().UnloadIfIdle({{2, kWidth}}), nullptr);  // in use
  EXPECT_EQ(variants().UnloadIfIdle({{1, kWidth}}), nullptr);  // the load-time shape
  std::shared_ptr<runtime::CompiledModel> gone = variants().UnloadIfIdle(coldest->key);
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone.use_count(), 1);  // the last owner: dropping it frees it
  EXPECT_EQ(variants().Loaded().size(), 3u);
  EXPECT_EQ(variants().ColdestIdle()->key, (VariantKey{{4, kWidth}}));
  held->reset();
  EXPECT_EQ(variants().ColdestIdle()->key, (VariantKey{{4, kWidth}}));  // 2 was used later
  const int64_t before = variants().compiles();
  ExpectComputes(3);  // asked again: compiled again
  EXPECT_EQ(variants().compiles(), before + 1);
}

TEST_F(ShapeVariantsTest, AShapeThatFailsForGoodIsNotCompiledAgain) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(manager_->FindForShapes("m", {{13, kWidth}}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(builds_.load(), 1);
  // A transient failure is tried again by the next request.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(manager_->FindForShapes("m", {{17, kWidth}}).status().code(),
              absl::StatusCode::kResourceExhausted);
  }
  EXPECT_EQ(builds_.load(), 3);
  ExpectComputes(4);  // and the model still serves
}

TEST_F(ShapeVariantsTest, ShapesThatCannotBeTheModelsAreInvalidArgument) {
  ASSERT_TRUE(Load(/*two_inputs=*/true).ok());
  auto status = [&](std::vector<std::vector<int64_t>> shapes) {
    return manager_->FindForShapes("m", shapes).status();
  };
  absl::Status rank = status({{2, kWidth, 1}, {2, kWidth}});
  EXPECT_EQ(rank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rank.message()), HasSubstr("input 'a' has rank 2"));
  absl::Status fixed = status({{2, kWidth + 1}, {2, kWidth}});
  EXPECT_EQ(fixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(fixed.message()), HasSubstr("input 'a' dim 1 is 24 in the model"));
  absl::Status negative = status({{-1, kWidth}, {-1, kWidth}});
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.message()), HasSubstr("must be at least 0"));
  absl::Status disagree = status({{2, kWidth}, {3, kWidth}});
  EXPECT_EQ(disagree.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(disagree.message()), HasSubstr("'batch'"));
  EXPECT_EQ(variants().compiles(), 0);  // nothing was compiled for them
  EXPECT_TRUE(status({{3, kWidth}, {3, kWidth}}).ok());
  EXPECT_EQ(manager_->FindForShapes("nope", {{1, kWidth}}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ShapeVariantsTest, ADeclaredRangeRefusesSizesOutsideItNamingTheRange) {
  ASSERT_TRUE(Load(/*two_inputs=*/false, 8, {{"batch", {2, 8}}}, {}, /*load_batch=*/2).ok());
  for (int64_t outside : {1, 9}) {
    absl::Status s = manager_->FindForShapes("m", {{outside, kWidth}}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("input 'x' dim 0 ('batch') is ", outside,
                                       ", outside the model's declared range 2..8")));
  }
  EXPECT_EQ(variants().compiles(), 0);
  ExpectComputes(8);
}

TEST_F(ShapeVariantsTest, EagerShapesAreCompiledAtLoad) {
  ASSERT_TRUE(Load(/*two_inputs=*/false, 8, {}, {{{"batch", 4}}, {{"batch", 16}}}).ok());
  EXPECT_EQ(variants().Loaded().size(), 3u);  // 1 (the load shape), 4 and 16
  const int builds = builds_.load();
  ExpectComputes(16);
  ExpectComputes(4);
  EXPECT_EQ(builds_.load(), builds);  // nothing built on first use
}

TEST_F(ShapeVariantsTest, RangesAndEagerShapesTheModelCannotTakeAreRefusedAtLoad) {
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(Load(false, 8, {{"seq", {1, 8}}})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Load(false, 8, {{"batch", {4, 2}}})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Load(false, 8, {{"batch", {2, 8}}}, {{{"batch", 9}}}, 2)),
            absl::StatusCode::kInvalidArgument);  // eager shape outside the range
  EXPECT_EQ(code(Load(false, 8, {}, {{{"seq", 9}}})), absl::StatusCode::kInvalidArgument);
  absl::Status too_many = Load(false, 2, {}, {{{"batch", 2}}, {{"batch", 3}}});
  EXPECT_EQ(too_many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_many.message()), HasSubstr("--max-shape-variants"));
  absl::Status load_outside = Load(false, 8, {{"batch", {2, 8}}});  // loads batch 1
  EXPECT_EQ(load_outside.code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShapeVariantsTest, ALargerLoadedBatchIsFoundForANewOne) {
  ASSERT_TRUE(Load(/*two_inputs=*/false, 8, {}, {{{"batch", 8}}, {{"batch", 4}}}).ok());
  auto found = variants().FindLargerBatch({{3, kWidth}});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rows, 4);  // the fewest rows that hold 3
  EXPECT_EQ(found->model, variants().Peek({{4, kWidth}}));
  EXPECT_EQ(variants().FindLargerBatch({{6, kWidth}})->rows, 8);
  EXPECT_FALSE(variants().FindLargerBatch({{8, kWidth}}).has_value());  // none larger
  EXPECT_FALSE(variants().FindLargerBatch({{2, kWidth + 1}}).has_value());  // another width
}

TEST_F(ShapeVariantsTest, CompileSoonCompilesOnceAndGetWaitsForIt) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  std::vector<std::function<void(bool)>> queued;
  ShapeVariants::Schedule hold = [&](std::function<void(bool)> task) {
    queued.push_back(std::move(task));
  };
  variants().CompileSoon({{5, kWidth}}, hold);
  variants().CompileSoon({{5, kWidth}}, hold);  // already claimed: nothing more
  variants().CompileSoon({{13, kWidth}}, hold);  // claimed too; fails when run
  variants().CompileSoon({{5, kWidth + 1}}, hold);  // not the model's: never claimed
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(variants().Peek({{5, kWidth}}), nullptr);  // not compiled yet
  std::thread waiter([&] { ExpectComputes(5); });  // waits for the queued compile
  queued[0](/*cancelled=*/false);
  waiter.join();
  EXPECT_NE(variants().Peek({{5, kWidth}}), nullptr);
  EXPECT_EQ(variants().compiles(), 2);
  // A cancelled compile leaves nothing behind: the shape is tried afresh
  // by the next request (here the model refuses batch 13 for good).
  const int builds = builds_.load();
  queued[1](/*cancelled=*/true);
  EXPECT_EQ(manager_->FindForShapes("m", {{13, kWidth}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(builds_.load(), builds + 1);
}

TEST_F(ShapeVariantsTest, TheLastCompileIsTimed) {
  ASSERT_TRUE(Load(/*two_inputs=*/false).ok());
  const int64_t compiles = variants().compiles();
  EXPECT_EQ(variants().last_compile_ns() > 0, compiles > 0);
  ExpectComputes(5);  // a new batch: compiled now
  EXPECT_EQ(variants().compiles(), compiles + 1);
  EXPECT_GT(variants().last_compile_ns(), 0);
}

TEST(ServePaddedWhileCompilingTest, PadsOnlyWhenTheLargerRunIsQuickerThanACompile) {
  EXPECT_TRUE(ServePaddedWhileCompiling(5'000'000, 400'000'000));    // 5 ms run, 400 ms compile
  EXPECT_FALSE(ServePaddedWhileCompiling(600'000'000, 400'000'000));  // a big batch's long run
  EXPECT_TRUE(ServePaddedWhileCompiling(0, 400'000'000));   // never run yet
  EXPECT_TRUE(ServePaddedWhileCompiling(5'000'000, 0));     // nothing compiled yet
}

}  // namespace
}  // namespace kiln::engine
