// Whole models compiled and run through the JIT, against plain reference loops.
#include "engine/model_manager.h"

#include <atomic>
#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::FloatValues;

using ::kiln::testing::Op;
using runtime::Tensor;
using ::kiln::testing::Pseudorandom;

std::vector<float> ToVector(const Tensor& t) {
  const float* p = static_cast<const float*>(t.data());
  return std::vector<float>(p, p + t.type().NumElements());
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(double(want[i])))) << "at " << i;
  }
}

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // Every output of model `name` run on `x`, each as floats.
  std::vector<std::vector<float>> RunAll(const std::string& name, const std::vector<float>& x,
                                         const TensorType& type) {
    auto model = manager_->Find(name);
    EXPECT_NE(model, nullptr);
    if (!model) return {};
    auto input = Tensor::FromBytes(type, absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                           x.size() * 4));
    EXPECT_TRUE(input.ok()) << input.status();
    auto result = model->Run({&*input});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    std::vector<std::vector<float>> outputs;
    for (const Tensor& t : result->outputs) outputs.push_back(ToVector(t));
    return outputs;
  }

  std::vector<float> Run(const std::string& name, const std::vector<float>& x,
                         const TensorType& type) {
    std::vector<std::vector<float>> outputs = RunAll(name, x, type);
    return outputs.empty() ? std::vector<float>{} : outputs[0];
  }

  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, MlpMatchesReferenceAndSecondCompileHitsCache) {
  const int64_t batch = 4, in = 16, hidden = 32, out = 10;
  auto w1 = Pseudorandom(hidden * in, 1), b1 = Pseudorandom(hidden, 2);
  auto w2 = Pseudorandom(hidden * hidden, 3), b2 = Pseudorandom(hidden, 4);
  auto w3 = Pseudorandom(out * hidden, 5), b3 = Pseudorandom(out, 6);
  auto build = [&] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {batch, in}});
    Node* h = Op(g, "relu", {Op(g, "dense", {x, g.AddConstant("w1", FloatValues({hidden, in}, w1)),
                                             g.AddConstant("b1", FloatValues({hidden}, b1))})});
    h = Op(g, "relu", {Op(g, "dense", {h, g.AddConstant("w2", FloatValues({hidden, hidden}, w2)),
                                       g.AddConstant("b2", FloatValues({hidden}, b2))})});
    h = Op(g, "dense", {h, g.AddConstant("w3", FloatValues({out, hidden}, w3)),
                        g.AddConstant("b3", FloatValues({out}, b3))});
    g.AddOutput(Op(g, "softmax", {h}, AxisAttrs{-1}));
    return g;
  };
  auto first = manager_->Compile("mlp", build(), CompileOptions{});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kernels.size(), 4u);
  EXPECT_EQ(first->cache_misses, 4);

  auto x = Pseudorandom(batch * in, 7);
  using namespace kiln::testing;
  auto want = RefSoftmaxRows(
      RefDense(RefRelu(RefDense(RefRelu(RefDense(x, w1, b1, batch, in, hidden)), w2, b2, batch,
                                hidden, hidden)),
               w3, b3, batch, hidden, out),
      batch, out);
  ExpectNear(Run("mlp", x, {DType::kFloat32, {batch, in}}), want, 1e-5);

  auto second = manager_->Compile("mlp_again", build(), CompileOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->cache_hits, 4);
  for (const auto& k : second->kernels) EXPECT_TRUE(k.cache_hit()) << k.name;
  ExpectNear(Run("mlp_again", x, {DType::kFloat32, {batch, in}}), want, 1e-5);
}

TEST_F(ModelManagerTest, ConvWithElementwiseEpilogueMatchesReference) {
  const int64_t c = 3, h = 9, w = 11, o = 5;
  auto wt = Pseudorandom(o * c * 3 * 3, 11);
  auto cst = Pseudorandom(o * (h - 2) * (w - 2), 12);
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {1, c, h, w}});
  Node* conv = Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({o, c, 3, 3}, wt))}, Conv2DAttrs{});
  Node* k = g.AddConstant("k", FloatValues({1, o, h - 2, w - 2}, cst));
  g.AddOutput(Op(g, "relu", {Op(g, "add", {conv, k})}));
  auto r = manager_->Compile("conv", std::move(g), CompileOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernels.size(), 1u);
  auto xv = Pseudorandom(c * h * w, 13);
  auto want = kiln::testing::RefConv2D(xv, wt, {}, 1, c, h, w, o, 3, 3);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0f, want[i] + cst[i]);
  ExpectNear(Run("conv", xv, {DType::kFloat32, {1, c, h, w}}), want, 1e-5);
}

TEST_F(ModelManagerTest, FusedExpSumDivideEqualsSoftmaxWithoutShift) {
  const int64_t rows = 3, cols = 33;
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {rows, cols}});
  Node* e = Op(g, "exp", {x});
  g.AddOutput(Op(g, "div", {e, Op(g, "sum", {e}, ReduceAttrs{{-1}, true})}));
  auto r = manager_->Compile("esd", std::move(g), CompileOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernels.size(), 1u);
  auto xv = Pseudorandom(rows * cols, 21);
  ExpectNear(Run("esd", xv, {DType::kFloat32, {rows, cols}}),
             kiln::testing::RefSoftmaxRows(xv, rows, cols), 1e-6);
}

// Ten unfused elementwise kernels in a chain: each intermediate dies at the
// kernel after the one that writes it, so two ping-pong buffers hold the nine
// intermediates (the output is written into the caller's tensor, not the arena).
TEST_F(ModelManagerTest, MemoryPlanSharesBuffersOfDeadIntermediates) {
  Graph g;
  Node* v = g.AddInput("x", {DType::kFloat32, {64}});
  for (int i = 0; i < 10; ++i) v = Op(g, i % 2 ? "exp" : "neg", {v});
  g.AddOutput(v);
  CompileOptions options;
  options.disabled_passes = {"FuseOps"};
  auto r = manager_->Compile("chain", std::move(g), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernels.size(), 10u);
  EXPECT_EQ(r->intermediate_bytes_unplanned, 9 * 256);
  EXPECT_EQ(r->intermediate_bytes, 2 * 256);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = (i - 32) / 16.0f;
  std::vector<float> want = x;
  for (int k = 0; k < 10; ++k) {
    for (float& f : want) f = k % 2 ? std::exp(f) : -f;
  }
  ExpectNear(Run("chain", x, {DType::kFloat32, {64}}), want, 1e-5);
}

// Outputs are written in place into the result tensors; these are the cases
// that must still come out right: an output a later kernel reads, the same
// value listed twice, and a graph input returned as an output.
TEST_F(ModelManagerTest, OutputsThatAreReadLaterRepeatedOrInputs) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {64}});
  Node* n = Op(g, "neg", {x});
  Node* e = Op(g, "exp", {n});
  g.AddOutput(n);
  g.AddOutput(e);
  g.AddOutput(n);
  g.AddOutput(x);
  CompileOptions options;
  options.disabled_passes = {"FuseOps"};
  auto r = manager_->Compile("outs", std::move(g), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernels.size(), 2u);
  EXPECT_EQ(r->intermediate_bytes, 0);
  std::vector<float> xv(64), neg(64), ex(64);
  for (int i = 0; i < 64; ++i) {
    xv[i] = (i - 32) / 16.0f;
    neg[i] = -xv[i];
    ex[i] = std::exp(-xv[i]);
  }
  for (int call = 0; call < 2; ++call) {  // the second call reuses the workspace
    std::vector<std::vector<float>> outputs = RunAll("outs", xv, {DType::kFloat32, {64}});
    ASSERT_EQ(outputs.size(), 4u);
    ExpectNear(outputs[0], neg, 0);
    ExpectNear(outputs[1], ex, 1e-6);
    ExpectNear(outputs[2], neg, 0);
    ExpectNear(outputs[3], xv, 0);
  }
}

// A compile whose caller's deadline has passed by the time it ends does not
// load the model (nobody would know it is there); its kernels stay cached.
TEST_F(ModelManagerTest, ACompileEndingPastItsDeadlineDoesNotLoadTheModel) {
  auto build = [] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {4, 8}});
    g.AddOutput(Op(g, "relu", {x}));
    return g;
  };
  auto late = manager_->Compile("late", build(), CompileOptions{}, nullptr,
                                absl::Now() - absl::Seconds(1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(manager_->Get("late").has_value());
  auto again = manager_->Compile("late", build(), CompileOptions{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cache_hits, 1);  // the abandoned compile's kernel was kept
  EXPECT_TRUE(manager_->Get("late").has_value());
}

// A compile whose caller has gone stops at the next check: between passes
// it compiles no kernel at all; between kernels it keeps the ones it made
// (cached for the next try); either way the model is not loaded.
TEST_F(ModelManagerTest, AnAbandonedCompileStopsAtItsNextCheckAndLoadsNothing) {
  auto build = [] {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {4, 8}});
    Node* w = g.AddConstant("w", FloatValues({8, 8}, std::vector<float>(64, 0.5f)));
    Node* y = Op(g, "relu", {Op(g, "dense", {x, w})});
    g.AddOutput(Op(g, "softmax", {y}, AxisAttrs{-1}));  // a second kernel
    return g;
  };
  CompileOptions gone_at_once;
  int asked = 0;
  gone_at_once.should_stop = [&asked] {
    ++asked;
    return true;
  };
  auto stopped = manager_->Compile("gone", build(), gone_at_once);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
  EXPECT_EQ(asked, 1);  // the first pass never ran
  EXPECT_FALSE(manager_->Get("gone").has_value());
  EXPECT_EQ(manager_->GetCacheStats().compiles, 0);

  // Gone after the first kernel: a full compile asks once per pass, group
  // and kernel and once before loading, so the next-to-last check is the
  // one before the second kernel.
  // Atomic: the dry run's two compile threads both ask (ThreadSanitizer
  // caught the plain int).
  std::atomic<int> checks{0};
  {
    CompileOptions count;
    count.should_stop = [&checks] {
      ++checks;
      return false;
    };
    auto dry = ModelManager::Create({});
    ASSERT_TRUE(dry.ok());
    ASSERT_TRUE((*dry)->Compile("count", build(), count).ok());
  }
  CompileOptions gone_later;
  int calls = 0;
  // One compile thread, so the checks come in order. Which of the two
  // kernels goes first is the driver's choice: only that one was made is
  // asserted.
  ModelManagerOptions one_thread;
  one_thread.compile_threads = 1;
  auto manager = ModelManager::Create(one_thread);
  ASSERT_TRUE(manager.ok());
  gone_later.should_stop = [&] { return ++calls >= checks - 1; };
  auto late = (*manager)->Compile("late", build(), gone_later);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kCancelled) << late.status();
  EXPECT_FALSE((*manager)->Get("late").has_value());
  EXPECT_EQ((*manager)->GetCacheStats().compiles, 1);
  auto again = (*manager)->Compile("late", build(), CompileOptions{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cache_hits, 1);
  EXPECT_EQ(again->cache_misses, 1);
}

// A call whose deadline passes while it runs stops between kernels.
TEST_F(ModelManagerTest, ARunPastItsDeadlineStopsBetweenKernels) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {4, 8}});
  Node* w = g.AddConstant("w", FloatValues({8, 8}, std::vector<float>(64, 0.5f)));
  g.AddOutput(Op(g, "softmax", {Op(g, "relu", {Op(g, "dense", {x, w})})}, AxisAttrs{-1}));
  ASSERT_TRUE(manager_->Compile("two_kernels", std::move(g), CompileOptions{}).ok());
  std::shared_ptr<runtime::CompiledModel> model = manager_->Find("two_kernels");
  ASSERT_EQ(model->program().kernels.size(), 2u);
  std::vector<float> xv(32, 1.0f);
  auto input = Tensor::FromBytes({DType::kFloat32, {4, 8}},
                                 absl::string_view(reinterpret_cast<const char*>(xv.data()), 128));
  ASSERT_TRUE(input.ok());
  auto late = model->Run({&*input}, absl::Now() - absl::Seconds(1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(std::string(late.status().message()), ::testing::HasSubstr("after kernel 1 of 2"));
  auto in_time = model->Run({&*input}, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(in_time.ok()) << in_time.status();
  const float* out = static_cast<const float*>(in_time->outputs[0].data());
  EXPECT_FLOAT_EQ(out[0], 1.0f / 8);  // all logits equal: a uniform softmax
}

TEST_F(ModelManagerTest, UnloadUnknownModelIsNotFound) {
  EXPECT_EQ(manager_->Unload("ghost").code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, ModelLimitIsResourceExhaustedNamingTheFlag) {
  auto m = ModelManager::Create({/*max_models=*/1});
  ASSERT_TRUE(m.ok());
  auto build = [] {
    Graph g;
    g.AddOutput(Op(g, "relu", {g.AddInput("x", {DType::kFloat32, {4}})}));
    return g;
  };
  ASSERT_TRUE((*m)->Compile("a", build(), CompileOptions{}).ok());
  auto second = (*m)->Compile("b", build(), CompileOptions{});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second.status().message()), ::testing::HasSubstr("--max-models"));
  EXPECT_TRUE((*m)->Compile("a", build(), CompileOptions{}).ok());  // replacing is fine
}

// The same model compiled again keeps its version; named with another (a
// model store's version over a stale local copy: X v1 here, the cluster has
// since served Y v2 and now X again as v3), it is served as that version.
TEST_F(ModelManagerTest, TheSameModelNamedWithAnotherVersionTakesIt) {
  auto build = [] {
    Graph g;
    g.AddOutput(Op(g, "relu", {g.AddInput("x", {DType::kFloat32, {4}})}));
    return g;
  };
  auto m = ModelManager::Create({});
  ASSERT_TRUE(m.ok());
  ModelManager& manager = **m;
  const ModelIdentity first{/*fingerprint=*/42, /*replace=*/false, /*version=*/0, false};
  ASSERT_TRUE(manager.Compile("x", build(), {}, nullptr, absl::InfiniteFuture(), first).ok());
  EXPECT_EQ(manager.Serve("x", "")->version, 1);
  ASSERT_TRUE(manager.Compile("x", build(), {}, nullptr, absl::InfiniteFuture(), first).ok());
  EXPECT_EQ(manager.Serve("x", "")->version, 1);
  const ModelIdentity cluster{/*fingerprint=*/42, /*replace=*/true, /*version=*/3, false};
  ASSERT_TRUE(manager.Compile("x", build(), {}, nullptr, absl::InfiniteFuture(), cluster).ok());
  EXPECT_EQ(manager.Serve("x", "")->version, 3);
  EXPECT_THAT(manager.Versions("x"), ::testing::ElementsAre(3));
}

// A repository's versions of one name are models of their own, served side
// by side: "" is the highest, another version NotFound naming both.
TEST_F(ModelManagerTest, VersionsServedBesideEachOtherAreSeparateModels) {
  auto build = [](const char* op) {
    Graph g;
    g.AddOutput(Op(g, op, {g.AddInput("x", {DType::kFloat32, {4}})}));
    return g;
  };
  auto beside = [](int64_t version) {
    return ModelIdentity{/*fingerprint=*/static_cast<uint64_t>(version), /*replace=*/true,
                         version, /*beside=*/true};
  };
  auto m = ModelManager::Create({/*max_models=*/2});
  ASSERT_TRUE(m.ok());
  ModelManager& manager = **m;
  ASSERT_TRUE(manager.Compile("m", build("relu"), {}, nullptr, absl::InfiniteFuture(), beside(2))
                  .ok());
  ASSERT_TRUE(manager.Compile("m", build("exp"), {}, nullptr, absl::InfiniteFuture(), beside(3))
                  .ok());
  EXPECT_THAT(manager.Versions("m"), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(manager.List().size(), 2u);
  // A third version is a third model: over --max-models 2.
  EXPECT_EQ(manager.Compile("m", build("relu"), {}, nullptr, absl::InfiniteFuture(), beside(4))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);

  const std::vector<float> x = {-1.0f, 2.0f, -3.0f, 0.5f};
  auto run = [&](const std::string& version) -> std::vector<float> {
    absl::StatusOr<ServedModel> served = manager.Serve("m", version);
    EXPECT_TRUE(served.ok()) << served.status();
    if (!served.ok()) return {};
    auto input = Tensor::FromBytes({DType::kFloat32, {4}},
                                   absl::string_view(reinterpret_cast<const char*>(x.data()), 16));
    auto result = served->model->Run({&*input});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? ToVector(result->outputs[0]) : std::vector<float>{};
  };
  EXPECT_EQ(run("2"), (std::vector<float>{0.0f, 2.0f, 0.0f, 0.5f}));
  const std::vector<float> exp_x = {std::exp(-1.0f), std::exp(2.0f), std::exp(-3.0f),
                                    std::exp(0.5f)};
  ExpectNear(run("3"), exp_x, 1e-5);
  ExpectNear(run(""), exp_x, 1e-5);
  EXPECT_EQ(manager.Serve("m", "")->version, 3);
  absl::StatusOr<ServedModel> missing = manager.Serve("m", "1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("version '1'"));
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("versions 2, 3"));

  ASSERT_TRUE(manager.UnloadVersion("m", 2).ok());
  EXPECT_EQ(manager.UnloadVersion("m", 2).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(manager.Versions("m"), ::testing::ElementsAre(3));
  // A compile through kiln.v1 makes the name serve that model alone, as the
  // next version.
  auto replaced = manager.Compile("m", build("relu"), {}, nullptr, absl::InfiniteFuture(),
                                  {/*fingerprint=*/99, /*replace=*/true});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_THAT(manager.Versions("m"), ::testing::ElementsAre(4));
}

}  // namespace
}  // namespace kiln::engine
