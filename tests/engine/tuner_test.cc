// The tuner end to end on a small model (a conv and a dense): a run with a
// tiny budget writes a record per contraction kernel; a later compile on the
// same CPU follows them (counted), takes the tuned kernels the tuner cached,
// and computes what the reference loops do; a cache whose CPU differs (a
// forged name) reads the same records and uses none.
#include "engine/tuner.h"

#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;

constexpr int64_t kC = 16, kH = 14, kO = 32, kOut = 64, kFlat = kO * kH * kH;

class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_tuner_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
    x_ = Pseudorandom(kC * kH * kH, 1);
    w_ = Pseudorandom(kO * kC * 9, 2);
    b_ = Pseudorandom(kO, 3);
    dw_ = Pseudorandom(kOut * kFlat, 4);
    db_ = Pseudorandom(kOut, 5);
  }
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  // dense(reshape(relu(conv3x3(x))))
  Graph Model() const {
    Graph g;
    Node* in = g.AddInput("x", {DType::kFloat32, {1, kC, kH, kH}});
    Conv2DAttrs attrs;
    attrs.strides = {1, 1};
    attrs.padding = {1, 1, 1, 1};
    Node* y = Op(g, "conv2d",
                 {in, g.AddConstant("w", FloatValues({kO, kC, 3, 3}, w_)),
                  g.AddConstant("b", FloatValues({kO}, b_))},
                 attrs);
    y = Op(g, "relu", {y});
    y = Op(g, "reshape", {y}, ReshapeAttrs{{1, kFlat}});
    g.AddOutput(Op(g, "dense",
                   {y, g.AddConstant("dw", FloatValues({kOut, kFlat}, dw_)),
                    g.AddConstant("db", FloatValues({kOut}, db_))}));
    return g;
  }

  std::vector<float> Reference() const {
    std::vector<float> y =
        kiln::testing::RefConv2DStrided(x_, w_, b_, 1, kC, kH, kH, kO, 3, 3, 1, 1);
    y = kiln::testing::RefRelu(std::move(y));
    return kiln::testing::RefDense(y, dw_, db_, 1, kFlat, kOut);
  }

  std::unique_ptr<ModelManager> Manager(const std::string& cpu = "") const {
    ModelManagerOptions o;
    o.cache.dir = dir_;
    if (!cpu.empty()) o.cache.target.cpu = cpu;
    auto m = ModelManager::Create(o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }

  void ExpectMatchesReference(ModelManager& manager) {
    auto input = runtime::Tensor::FromBytes(
        {DType::kFloat32, {1, kC, kH, kH}},
        absl::string_view(reinterpret_cast<const char*>(x_.data()), x_.size() * 4));
    ASSERT_TRUE(input.ok());
    auto result = manager.Find("m")->Run({&*input});
    ASSERT_TRUE(result.ok()) << result.status();
    const std::vector<float> want = Reference();
    const float* got = static_cast<const float*>(result->outputs[0].data());
    ASSERT_EQ(result->outputs[0].type().NumElements(), kOut);
    for (int64_t i = 0; i < kOut; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-3 * std::max(1.0, std::fabs(double(want[i])))) << i;
    }
  }

  std::string dir_;
  std::vector<float> x_, w_, b_, dw_, db_;
};

TEST_F(TunerTest, RecordsAreUsedBySecondCompileOnTheSameCpuOnly) {
  std::unique_ptr<ModelManager> manager = Manager();
  ASSERT_NE(manager, nullptr);
  TuneOptions tune;
  tune.budget_s_per_kernel = 0.2;
  tune.max_candidates = 3;
  tune.min_gain = 0;  // record the fastest candidate whatever it measured
  tune.model_runs = 2;
  int events = 0;
  auto tuned = TuneGraph(Model(), {}, tune, manager->cache(),
                         [&](const KernelTuning& k, int done, int total) {
                           ++events;
                           EXPECT_EQ(done, events);
                           EXPECT_EQ(total, 2);
                           EXPECT_GE(k.candidates, 2) << k.name;
                         });
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(events, 2);
  ASSERT_EQ(tuned->kernels.size(), 2u);
  EXPECT_EQ(tuned->records_written, 2);
  for (const KernelTuning& k : tuned->kernels) {
    EXPECT_TRUE(k.recorded) << k.name;
    EXPECT_FALSE(k.best_override.empty()) << k.name;
    EXPECT_GT(k.default_us, 0);
    EXPECT_GT(k.best_us, 0);
  }

  // A second compile, in the process that tuned: every contraction follows
  // its record and comes from the cache the tuner filled.
  auto compiled = manager->Compile("m", Model(), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->tuned_kernels, 2);
  EXPECT_EQ(manager->cache().tuning().uses(), 2);
  int tuned_reports = 0;
  for (const KernelCompileReport& k : compiled->kernels) {
    if (k.tuned.empty()) continue;
    ++tuned_reports;
    EXPECT_TRUE(k.cache_hit()) << k.name;
    EXPECT_THAT(k.tuned,
                ::testing::AnyOf(tuned->kernels[0].best_override, tuned->kernels[1].best_override));
  }
  EXPECT_EQ(tuned_reports, 2);
  ExpectMatchesReference(*manager);
  const CacheStats stats = manager->cache().Stats();
  EXPECT_EQ(stats.tuning_records_here, 2);
  int tuned_entries = 0;
  for (const KernelInfo& k : stats.entries) {
    if (k.tuned.empty()) continue;
    ++tuned_entries;
    EXPECT_GT(k.tuned_gain, 0);
  }
  EXPECT_EQ(tuned_entries, 2);
  manager.reset();

  // A restarted server on the same CPU reads the records from the directory.
  std::unique_ptr<ModelManager> restarted = Manager();
  auto again = restarted->Compile("m", Model(), {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tuned_kernels, 2);
  ExpectMatchesReference(*restarted);
  restarted.reset();

  // Another CPU (a forged name in the cache's target) uses none of them.
  std::unique_ptr<ModelManager> elsewhere = Manager("forged-cpu");
  auto there = elsewhere->Compile("m", Model(), {});
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_EQ(there->tuned_kernels, 0);
  for (const KernelCompileReport& k : there->kernels) EXPECT_EQ(k.tuned, "") << k.name;
  EXPECT_EQ(elsewhere->cache().tuning().uses(), 0);
  const CacheStats there_stats = elsewhere->cache().Stats();
  EXPECT_EQ(there_stats.tuning_records_here, 0);
  EXPECT_EQ(there_stats.tuning_records_total, 2);
  ExpectMatchesReference(*elsewhere);
}

// Timed alone instead of in the model, a tune records the same way.
TEST_F(TunerTest, KernelsTimedAloneAreRecordedToo) {
  std::unique_ptr<ModelManager> manager = Manager();
  ASSERT_NE(manager, nullptr);
  TuneOptions tune;
  tune.in_model = false;
  tune.budget_s_per_kernel = 0.1;
  tune.max_candidates = 2;
  tune.min_gain = 0;
  tune.repeat = 3;
  tune.flush_bytes = 1 << 20;
  auto tuned = TuneGraph(Model(), {}, tune, manager->cache());
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->records_written, 2);
  auto compiled = manager->Compile("m", Model(), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->tuned_kernels, 2);
  ExpectMatchesReference(*manager);
}

}  // namespace
}  // namespace kiln::engine
