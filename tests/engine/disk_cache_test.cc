// The persistent kernel cache: hits across caches (as across restarts), and
// every kind of bad entry detected, removed and recompiled — never linked.
#include "engine/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "compiler/driver/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/kernel_cache.h"
#include "tests/test_util/graph_building.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::Op;
using runtime::JitEngine;

KernelSpec Spec(int64_t n) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {n}});
  g.AddOutput(Op(g, "exp", {Op(g, "neg", {x})}));
  auto p = CompileGraph(std::move(g), CompileOptions{});
  EXPECT_TRUE(p.ok());
  return p->kernels[0];
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_disk_cache_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto jit = JitEngine::Create();
    ASSERT_TRUE(jit.ok());
    jit_ = *jit;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // A fresh cache on the same directory: what a restarted server has.
  std::unique_ptr<KernelCache> NewCache(int64_t max_bytes = 1 << 30) {
    KernelCacheOptions o;
    o.dir = dir_;
    o.max_bytes = max_bytes;
    return std::make_unique<KernelCache>(jit_, o);
  }

  // Runs the kernel on [0, 1, ...] and checks exp(-x).
  void ExpectKernelWorks(const CacheLookup& lookup, int64_t n) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.25f;
    void* args[] = {x.data(), y.data()};
    lookup.kernel->fn()(args);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::exp(-x[i]), 1e-6);
  }

  std::string dir_;
  std::shared_ptr<JitEngine> jit_;
};

TEST_F(DiskCacheTest, SecondCacheOnSameDirectoryLoadsFromDisk) {
  auto first = NewCache()->GetOrCompile(Spec(32), {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, CacheSource::kCompiled);
  auto cache = NewCache();
  auto second = cache->GetOrCompile(Spec(32), {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source, CacheSource::kDisk);
  EXPECT_EQ(second->compile_ms, first->compile_ms);  // the original compile time
  EXPECT_GT(second->load_ms, 0);
  ExpectKernelWorks(*second, 32);
  EXPECT_EQ(cache->Stats().disk.hits, 1);
  EXPECT_EQ(cache->Stats().compiles, 0);
}

enum class Damage { kFlipByte, kTruncate, kWrongVersion };

class DiskCacheDamageTest : public DiskCacheTest,
                            public ::testing::WithParamInterface<Damage> {};

TEST_P(DiskCacheDamageTest, DamagedEntryIsCountedRemovedAndRecompiled) {
  auto first = NewCache()->GetOrCompile(Spec(16), {});
  ASSERT_TRUE(first.ok());
  const std::string path = absl::StrCat(dir_, "/", first->key_hex, ".kkc");
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 200u);
  switch (GetParam()) {
    case Damage::kFlipByte:
      bytes[bytes.size() / 2] ^= 0x10;
      break;
    case Damage::kTruncate:
      bytes.resize(bytes.size() - 100);
      break;
    case Damage::kWrongVersion: {
      // A well-formed entry of another format version (checksum made to match).
      const uint32_t other = kCacheFormatVersion + 1;
      std::memcpy(&bytes[8], &other, 4);
      bytes.resize(bytes.size() - 32);
      bytes += Sha256(bytes);
      std::string why;
      ASSERT_FALSE(DecodeDiskEntry(bytes, &why).has_value());
      EXPECT_THAT(why, ::testing::HasSubstr("format version"));
      break;
    }
  }
  WriteFile(path, bytes);
  auto cache = NewCache();
  auto again = cache->GetOrCompile(Spec(16), {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kCompiled);
  ExpectKernelWorks(*again, 16);
  DiskCacheStats stats = cache->Stats().disk;
  EXPECT_EQ(stats.corrupt, 1);
  // Recompiled and written back whole.
  std::string why;
  EXPECT_TRUE(DecodeDiskEntry(ReadFile(path), &why).has_value()) << why;
}

INSTANTIATE_TEST_SUITE_P(AllDamage, DiskCacheDamageTest,
                         ::testing::Values(Damage::kFlipByte, Damage::kTruncate,
                                           Damage::kWrongVersion));

TEST_F(DiskCacheTest, EvictionKeepsBudgetAndNeverBreaksLoadedKernels) {
  // A budget of about one entry: each store evicts the least recently used.
  auto cache = NewCache(/*max_bytes=*/6000);
  auto a = cache->GetOrCompile(Spec(8), {});
  ASSERT_TRUE(a.ok());
  for (int64_t n = 9; n < 14; ++n) ASSERT_TRUE(cache->GetOrCompile(Spec(n), {}).ok());
  DiskCacheStats stats = cache->Stats().disk;
  EXPECT_GT(stats.evictions, 0);
  EXPECT_LE(stats.bytes, 6000 + 0);
  // The first kernel's file is gone, its loaded code still runs.
  ExpectKernelWorks(*a, 8);
}

TEST_F(DiskCacheTest, UnwritableDirectoryDegradesToMemoryOnly) {
  if (::geteuid() == 0) {
    // root ignores permissions; use a path under a regular file instead.
    WriteFile(dir_ + "/file", "x");
    KernelCacheOptions o;
    o.dir = dir_ + "/file/cache";
    KernelCache cache(jit_, o);
    auto r = cache.GetOrCompile(Spec(8), {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(cache.Stats().disk.enabled);
    ExpectKernelWorks(*r, 8);
    return;
  }
  ::chmod(dir_.c_str(), 0500);
  KernelCacheOptions o;
  o.dir = dir_ + "/sub";
  KernelCache cache(jit_, o);
  auto r = cache.GetOrCompile(Spec(8), {});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(cache.Stats().disk.enabled);
  ::chmod(dir_.c_str(), 0700);
}

TEST_F(DiskCacheTest, StaleTempFilesOfDeadWritersAreRemovedAtStart) {
  ASSERT_TRUE(NewCache()->GetOrCompile(Spec(8), {}).ok());
  const std::string stale = dir_ + "/tmp/" + std::string(64, 'a') + ".999999999.0";
  const std::string live =
      dir_ + "/tmp/" + std::string(64, 'b') + "." + std::to_string(::getpid()) + ".7";
  WriteFile(stale, "partial");
  WriteFile(live, "partial");
  NewCache();
  EXPECT_NE(::access(stale.c_str(), F_OK), 0);
  EXPECT_EQ(::access(live.c_str(), F_OK), 0);
}

// An entry made up for DiskCache alone (never linked): key `c` * 64.
DiskEntry MadeUpEntry(char c) {
  DiskEntry e;
  e.key.hex = std::string(64, c);
  e.key.canonical = std::string("canonical ") + c;
  e.key.target.triple = "x86_64-unknown-linux-gnu";
  e.symbol = "k";
  e.object = std::string(100, c);
  return e;
}

// A failed write pauses writes and is counted; reads go on, and writes
// resume once the pause is over (issue 20: one failure turned the cache
// off for good, reads included).
TEST_F(DiskCacheTest, AFailedWriteLeavesReadsOnAndWritesResumeLater) {
  std::unique_ptr<DiskCache> cache = DiskCache::Open(dir_, 1 << 30, absl::Milliseconds(200));
  cache->Store(MadeUpEntry('a'));
  ASSERT_TRUE(cache->Load(MadeUpEntry('a').key).has_value());
  // tmp/ replaced by a file: the next temp file cannot be created (as root too).
  ASSERT_EQ(std::system(("rm -rf " + dir_ + "/tmp").c_str()), 0);
  WriteFile(dir_ + "/tmp", "not a directory");
  cache->Store(MadeUpEntry('b'));
  DiskCacheStats stats = cache->Stats();
  EXPECT_EQ(stats.write_failures, 1);
  EXPECT_TRUE(stats.enabled);
  EXPECT_FALSE(stats.writing);
  EXPECT_TRUE(cache->Load(MadeUpEntry('a').key).has_value());
  EXPECT_FALSE(cache->Load(MadeUpEntry('b').key).has_value());

  ASSERT_EQ(::unlink((dir_ + "/tmp").c_str()), 0);
  ASSERT_EQ(::mkdir((dir_ + "/tmp").c_str(), 0755), 0);
  cache->Store(MadeUpEntry('c'));  // still paused: not written, not a failure
  EXPECT_FALSE(cache->Load(MadeUpEntry('c').key).has_value());
  ::usleep(250 * 1000);
  cache->Store(MadeUpEntry('c'));
  EXPECT_TRUE(cache->Load(MadeUpEntry('c').key).has_value());
  EXPECT_TRUE(cache->Stats().writing);
  EXPECT_EQ(cache->Stats().write_failures, 1);
}

// A symlink planted in the cache directory is never followed: not read as
// an entry, not counted, and eviction never deletes what it points at.
TEST_F(DiskCacheTest, SymlinksInTheDirectoryAreNeverFollowed) {
  const std::string outside = dir_ + "/../" + dir_.substr(dir_.rfind('/') + 1) + "_outside";
  const std::string target_bytes = EncodeDiskEntry(MadeUpEntry('d'));  // a valid entry
  WriteFile(outside, target_bytes);
  std::unique_ptr<DiskCache> cache = DiskCache::Open(dir_, /*max_bytes=*/1);
  const std::string link = cache->PathFor(MadeUpEntry('d').key.hex);
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);

  EXPECT_FALSE(cache->Load(MadeUpEntry('d').key).has_value());
  EXPECT_EQ(cache->Stats().entries, 0);
  cache->Store(MadeUpEntry('e'));  // over the 1-byte budget: evicts
  EXPECT_EQ(ReadFile(outside), target_bytes);
  ::unlink(outside.c_str());
}

}  // namespace
}  // namespace kiln::engine
