// The cache key contract: names never matter; structure, shapes and options do.
#include "engine/kernel_cache.h"

#include <algorithm>
#include <set>
#include <thread>

#include "compiler/driver/compile.h"
#include "compiler/lower/contraction_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::Op;
using runtime::JitEngine;

KernelSpec SingleKernel(const std::string& input_name, std::vector<int64_t> shape,
                        const CompileOptions& options = {}) {
  Graph g;
  Node* x = g.AddInput(input_name, {DType::kFloat32, shape});
  g.AddOutput(Op(g, "relu", {Op(g, "exp", {x})}));
  auto p = CompileGraph(std::move(g), options);
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kernels.size(), 1u);
  return p->kernels[0];
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jit = JitEngine::Create();
    ASSERT_TRUE(jit.ok());
    jit_ = *jit;
    cache_ = std::make_unique<KernelCache>(jit_, KernelCacheOptions{});
  }
  std::shared_ptr<JitEngine> jit_;
  std::unique_ptr<KernelCache> cache_;
};

TEST_F(KernelCacheTest, CacheHitIgnoresNodeNames) {
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("completely_different", {8}), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->hit());
  EXPECT_EQ(b->source, CacheSource::kMemory);
  EXPECT_EQ(a->key_hex, b->key_hex);
  EXPECT_EQ(a->kernel, b->kernel);
}

TEST_F(KernelCacheTest, DifferentShapeIsAMiss) {
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("x", {9}), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit());
  EXPECT_NE(a->key_hex, b->key_hex);
}

TEST_F(KernelCacheTest, DifferentCodegenOptionsAreAMiss) {
  codegen::CodegenOptions o1;
  o1.opt_level = 1;
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("x", {8}), o1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit());
  EXPECT_NE(a->key_hex, b->key_hex);
}

// Checked and unchecked kernels never stand in for each other, in either
// order, and a miss says why.
TEST_F(KernelCacheTest, BoundsChecksAreAMissBothWays) {
  codegen::CodegenOptions checked;
  checked.bounds_checks = true;
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), checked);
  auto b = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto c = cache_->GetOrCompile(SingleKernel("y", {8}), checked);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_FALSE(b->hit());
  EXPECT_NE(a->key_hex, b->key_hex);
  EXPECT_NE(a->kernel, b->kernel);
  EXPECT_THAT(b->miss_reason, ::testing::HasSubstr("options O3 vs cached O3 bounds-checked"));
  EXPECT_EQ(c->source, CacheSource::kMemory);
  EXPECT_EQ(c->kernel, a->kernel);
}

// A disabled loop pass changes the loops, not the canonical structure.
TEST_F(KernelCacheTest, SkippedLoopPassIsAMissThatSaysSo) {
  CompileOptions without;
  without.disabled_passes = {"ReassociateIndices"};
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  const KernelSpec spec = SingleKernel("x", {8}, without);
  EXPECT_EQ(spec.skipped_loop_passes, "ReassociateIndices");
  auto b = cache_->GetOrCompile(spec, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit());
  EXPECT_NE(a->key_hex, b->key_hex);
  const KernelKey key = MakeKernelKey(spec, TargetDescription::Host(), {});
  EXPECT_THAT(key.options, ::testing::HasSubstr("without ReassociateIndices"));
}

// Contraction knobs pinned apart from the host's (another CPU's load cost)
// change the tiles, not the canonical structure: a miss, keyed on them; the
// host's own value is the host's kernel.
TEST_F(KernelCacheTest, PinnedContractionKnobsAreAMiss) {
  CompileOptions half, one;
  half.operand_load_cycles = 0.5;
  one.operand_load_cycles = 1;
  const KernelSpec host = SingleKernel("x", {8});
  const KernelSpec a = SingleKernel("x", {8}, half), b = SingleKernel("x", {8}, one);
  const double host_cycles = lower::HostContractionKnobs().operand_load_cycles;
  EXPECT_EQ(a.knobs, host_cycles == 0.5 ? "" : "loads 0.5");
  EXPECT_EQ(b.knobs, host_cycles == 1 ? "" : "loads 1");
  const KernelKey host_key = MakeKernelKey(host, TargetDescription::Host(), {});
  const KernelKey a_key = MakeKernelKey(a, TargetDescription::Host(), {});
  const KernelKey b_key = MakeKernelKey(b, TargetDescription::Host(), {});
  EXPECT_NE(a_key.hex, b_key.hex);
  EXPECT_EQ(host_key.hex, host_cycles == 0.5 ? a_key.hex : b_key.hex);
  auto pinned = cache_->GetOrCompile(host_cycles == 0.5 ? b : a, {});
  ASSERT_TRUE(pinned.ok());
  EXPECT_FALSE(pinned->hit());
  EXPECT_THAT(MakeKernelKey(host_cycles == 0.5 ? b : a, TargetDescription::Host(), {}).options,
              ::testing::HasSubstr(" knobs loads "));
}

TEST_F(KernelCacheTest, DifferentDtypeIsAMiss) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kInt64, {8}});
  g.AddOutput(Op(g, "relu", {Op(g, "neg", {x})}));
  auto p = CompileGraph(std::move(g), CompileOptions{});
  ASSERT_TRUE(p.ok());
  Graph f;
  Node* y = f.AddInput("x", {DType::kFloat32, {8}});
  f.AddOutput(Op(f, "relu", {Op(f, "neg", {y})}));
  auto q = CompileGraph(std::move(f), CompileOptions{});
  ASSERT_TRUE(q.ok());
  auto a = cache_->GetOrCompile(p->kernels[0], {});
  auto b = cache_->GetOrCompile(q->kernels[0], {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit());
  EXPECT_NE(a->key_hex, b->key_hex);
}

// Two caches for two CPUs (one pretends): the same structure gets another key,
// and the second cache's miss against its neighbour names the component.
TEST_F(KernelCacheTest, OtherTargetIsAMissThatNamesTheDifference) {
  KernelSpec spec = SingleKernel("x", {8});
  KernelCacheOptions other;
  other.target.cpu = "some-other-cpu";
  const KernelKey host_key = MakeKernelKey(spec, TargetDescription::Host(), {});
  const KernelKey other_key = MakeKernelKey(spec, other.target, {});
  EXPECT_NE(host_key.hex, other_key.hex);
  EXPECT_FALSE(host_key.SameIdentity(other_key));
  EXPECT_THAT(ExplainDifference(other_key, host_key),
              ::testing::HasSubstr("cpu some-other-cpu vs cached"));
}

TEST_F(KernelCacheTest, MissNextToSameOpsOtherShapeSaysWhichShape) {
  ASSERT_TRUE(cache_->GetOrCompile(SingleKernel("x", {8}), {}).ok());
  auto miss = cache_->GetOrCompile(SingleKernel("x", {9}), {});
  ASSERT_TRUE(miss.ok());
  EXPECT_THAT(miss->miss_reason, ::testing::HasSubstr("float32[9] vs cached p0:float32[8]"));
}

TEST_F(KernelCacheTest, KeyIsSha256Hex) {
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->key_hex.size(), 64u);
  EXPECT_EQ(a->key_hex.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST_F(KernelCacheTest, ConcurrentIdenticalRequestsCompileOnce) {
  KernelSpec spec = SingleKernel("x", {64});
  std::vector<std::thread> threads;
  // One int per thread: threads setting bits of one std::vector<bool> word
  // race (ThreadSanitizer found it).
  std::vector<int> hits(8, -1);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = cache_->GetOrCompile(spec, {});
      ASSERT_TRUE(r.ok());
      hits[i] = r->hit() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 7);
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 0), 1);
  CacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.compiles, 1);
  EXPECT_EQ(stats.memory_hits, 7);
  EXPECT_EQ(stats.memory_entries, 1);
}

// A waiter that gives up does not stop the compile it waited on: the result is
// cached for the next request.
TEST_F(KernelCacheTest, WaiterPastDeadlineGivesUpAndCompileStillLands) {
  KernelSpec spec = SingleKernel("x", {4096});
  std::thread first([&] { ASSERT_TRUE(cache_->GetOrCompile(spec, {}).ok()); });
  // Wait until the first caller has registered the compile.
  while (cache_->Stats().misses == 0) std::this_thread::yield();
  auto waiter = cache_->GetOrCompile(spec, {}, absl::Now());
  first.join();
  if (waiter.ok()) {
    GTEST_SKIP() << "the compile finished before the waiter looked";
  }
  EXPECT_EQ(waiter.status().code(), absl::StatusCode::kDeadlineExceeded);
  auto later = cache_->GetOrCompile(spec, {});
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->source, CacheSource::kMemory);
  EXPECT_EQ(cache_->Stats().compiles, 1);
}

TEST(KernelCacheMemoryTest, OverBudgetTheOldestKernelNobodyHoldsGoes) {
  auto jit = JitEngine::Create();
  ASSERT_TRUE(jit.ok());
  KernelCacheOptions options;
  options.memory_max_bytes = 1;  // every kernel is over budget once another comes
  KernelCache cache(*jit, options);
  absl::StatusOr<CacheLookup> held = cache.GetOrCompile(SingleKernel("x", {8}), {});
  ASSERT_TRUE(held.ok()) << held.status();
  {
    absl::StatusOr<CacheLookup> dropped = cache.GetOrCompile(SingleKernel("x", {9}), {});
    ASSERT_TRUE(dropped.ok());
  }
  // The {9} kernel is held by nobody now; the {8} one by `held`.
  ASSERT_TRUE(cache.GetOrCompile(SingleKernel("x", {10}), {}).ok());
  CacheStats stats = cache.Stats();
  EXPECT_GE(stats.memory_evictions, 1);
  std::set<std::string> kept;
  for (const KernelInfo& k : stats.entries) kept.insert(k.key_hex);
  EXPECT_TRUE(kept.count(held->key_hex)) << "a kernel in use was dropped";
  // A dropped kernel is compiled again when asked for.
  absl::StatusOr<CacheLookup> again = cache.GetOrCompile(SingleKernel("x", {9}), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, CacheSource::kCompiled);
  held = absl::UnknownError("released");
  cache.Trim();
  EXPECT_LE(cache.Stats().memory_entries, 1);  // only what was just handed out may stay
}

}  // namespace
}  // namespace kiln::engine
