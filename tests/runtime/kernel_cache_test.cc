// The cache key contract: names never matter; structure, shapes and options do.
#include "runtime/kernel_cache.h"

#include <thread>

#include "compiler/compile.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::Op;

KernelSpec SingleKernel(const std::string& input_name, std::vector<int64_t> shape) {
  Graph g;
  Node* x = g.AddInput(input_name, {DType::kFloat32, shape});
  g.AddOutput(Op(g, "relu", {Op(g, "exp", {x})}));
  auto p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kernels.size(), 1u);
  return p->kernels[0];
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jit = JitEngine::Create();
    ASSERT_TRUE(jit.ok());
    cache_ = std::make_unique<KernelCache>(*jit);
  }
  std::unique_ptr<KernelCache> cache_;
};

TEST_F(KernelCacheTest, CacheHitIgnoresNodeNames) {
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("completely_different", {8}), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->hit);
  EXPECT_TRUE(b->hit);
  EXPECT_EQ(a->key_hex, b->key_hex);
  EXPECT_EQ(a->kernel, b->kernel);
}

TEST_F(KernelCacheTest, DifferentShapeIsAMiss) {
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("x", {9}), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit);
  EXPECT_NE(a->key_hex, b->key_hex);
}

TEST_F(KernelCacheTest, DifferentCodegenOptionsAreAMiss) {
  codegen::CodegenOptions o1;
  o1.opt_level = 1;
  auto a = cache_->GetOrCompile(SingleKernel("x", {8}), {});
  auto b = cache_->GetOrCompile(SingleKernel("x", {8}), o1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->hit);
  EXPECT_NE(a->key_hex, b->key_hex);
}

TEST_F(KernelCacheTest, HashCollisionWithOtherStructureIsAMissKeptBeside) {
  KernelSpec a = SingleKernel("x", {8});
  KernelSpec b = SingleKernel("x", {9});
  b.structural_hash = a.structural_hash;  // force the collision
  auto ra = cache_->GetOrCompile(a, {});
  auto rb = cache_->GetOrCompile(b, {});
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->key_hex, rb->key_hex);
  EXPECT_FALSE(rb->hit);
  EXPECT_NE(ra->kernel, rb->kernel);
  EXPECT_EQ(cache_->Stats().entries, 2);
  EXPECT_TRUE(cache_->GetOrCompile(b, {})->hit);
}

TEST_F(KernelCacheTest, ConcurrentIdenticalRequestsCompileOnce) {
  KernelSpec spec = SingleKernel("x", {64});
  std::vector<std::thread> threads;
  std::vector<bool> hits(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = cache_->GetOrCompile(spec, {});
      ASSERT_TRUE(r.ok());
      hits[i] = r->hit;
    });
  }
  for (auto& t : threads) t.join();
  CacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 7);
  EXPECT_EQ(stats.entries, 1);
}

}  // namespace
}  // namespace kiln::runtime
