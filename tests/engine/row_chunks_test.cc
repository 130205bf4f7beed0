// A batch run as slices (engine/row_chunks.h): each slice's rows come out
// as a float64 loop over the whole batch computes them, on one thread and
// two; graphs whose rows mix are never split; the rule splits a
// cache-bound conv net and keeps a weight-bound dense layer whole.
#include "engine/row_chunks.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/passes/infer_type.h"
#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/thread_pool.h"
#include "tests/test_util/graph_building.h"
#include "tests/test_util/reference_ops.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using ::kiln::testing::Pseudorandom;
using runtime::Tensor;
using ::testing::HasSubstr;

constexpr int64_t kC = 3, kH = 10, kW = 10, kO = 8, kClasses = 5;

std::vector<float> ConvWeights() { return Pseudorandom(kO * kC * 9, 1); }
std::vector<float> ConvBias() { return Pseudorandom(kO, 2); }
std::vector<float> DenseWeights() { return Pseudorandom(kClasses * kO * kH * kW, 3); }
std::vector<float> DenseBias() { return Pseudorandom(kClasses, 4); }

// As an importer hands graphs over: with their types inferred.
Graph Typed(Graph g) {
  EXPECT_TRUE(InferTypes(g).ok());
  return g;
}

// conv 3x3 (pad 1) + bias -> relu -> flatten -> dense + bias -> softmax.
Graph ConvNet(int64_t rows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {rows, kC, kH, kW}});
  Conv2DAttrs conv;
  conv.padding = {1, 1, 1, 1};
  Node* c =
      Op(g, "conv2d", {x, g.AddConstant("w", FloatValues({kO, kC, 3, 3}, ConvWeights()))}, conv);
  c = Op(g, "relu", {Op(g, "add", {c, g.AddConstant("b", FloatValues({kO, 1, 1}, ConvBias()))})});
  Node* flat = Op(g, "reshape", {c}, ReshapeAttrs{{rows, kO * kH * kW}});
  Node* fc = Op(g, "dense",
                {flat, g.AddConstant("fc", FloatValues({kClasses, kO * kH * kW}, DenseWeights())),
                 g.AddConstant("fc_b", FloatValues({kClasses}, DenseBias()))});
  g.AddOutput(Op(g, "softmax", {fc}, AxisAttrs{-1}), "y");
  return Typed(std::move(g));
}

std::vector<float> Reference(const std::vector<float>& x, int64_t rows) {
  std::vector<float> c = testing::RefRelu(testing::RefConv2DStrided(
      x, ConvWeights(), ConvBias(), rows, kC, kH, kW, kO, 3, 3, /*stride=*/1, /*pad=*/1));
  std::vector<float> fc =
      testing::RefDense(c, DenseWeights(), DenseBias(), rows, kO * kH * kW, kClasses);
  return testing::RefSoftmaxRows(fc, rows, kClasses);
}

// A cache-bound conv: one image's 16 x 96 x 96 output (576 KB) fits any L2
// Kiln runs on, 8 images' do not.
Graph WideConv(int64_t rows) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {rows, 16, 96, 96}});
  Conv2DAttrs a;
  a.padding = {1, 1, 1, 1};
  Node* w = g.AddConstant("w", FloatValues({16, 16, 3, 3}, Pseudorandom(2304, 5)));
  g.AddOutput(Op(g, "relu", {Op(g, "conv2d", {x, w}, a)}), "y");
  return Typed(std::move(g));
}

// A classifier: conv 3x3 (pad 1) -> relu -> global mean -> dense 32 ->
// hidden (2048: 256 KB of weights) -> relu -> dense hidden -> 10. One
// image's conv output (288 KB) fits in half of L2 but six do not; the
// pooled features do.
constexpr int64_t kCc = 32, kCh = 48, kHidden = 2048, kOut = 10;
std::vector<float> ClassifierConv() { return Pseudorandom(kCc * 3 * 9, 11); }
std::vector<float> Hidden(int64_t hidden) { return Pseudorandom(hidden * kCc, 12); }
std::vector<float> HiddenBias(int64_t hidden) { return Pseudorandom(hidden, 13); }
std::vector<float> Logits(int64_t hidden) { return Pseudorandom(kOut * hidden, 14); }

Graph ConvClassifier(int64_t rows, int64_t hidden = kHidden) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, {rows, 3, kCh, kCh}});
  Conv2DAttrs conv;
  conv.padding = {1, 1, 1, 1};
  Node* c = Op(g, "relu",
               {Op(g, "conv2d",
                   {x, g.AddConstant("w", FloatValues({kCc, 3, 3, 3}, ClassifierConv()))}, conv)});
  Node* pooled =
      Op(g, "reshape", {Op(g, "mean", {c}, ReduceAttrs{{2, 3}, true})}, ReshapeAttrs{{rows, kCc}});
  Node* h = Op(g, "relu",
               {Op(g, "dense",
                   {pooled, g.AddConstant("h", FloatValues({hidden, kCc}, Hidden(hidden))),
                    g.AddConstant("hb", FloatValues({hidden}, HiddenBias(hidden)))})});
  g.AddOutput(Op(g, "dense", {h, g.AddConstant("o", FloatValues({kOut, hidden}, Logits(hidden)))}),
              "y");
  return Typed(std::move(g));
}

std::function<Graph(int64_t)> Classifier(int64_t hidden = kHidden) {
  return [hidden](int64_t rows) { return ConvClassifier(rows, hidden); };
}

std::vector<float> ClassifierReference(const std::vector<float>& x, int64_t rows,
                                       int64_t hidden = kHidden) {
  const std::vector<float> c = testing::RefRelu(testing::RefConv2DStrided(
      x, ClassifierConv(), {}, rows, 3, kCh, kCh, kCc, 3, 3, /*stride=*/1, /*pad=*/1));
  std::vector<float> pooled(rows * kCc, 0.0f);
  for (int64_t i = 0; i < rows * kCc; ++i) {
    double sum = 0;
    for (int64_t p = 0; p < kCh * kCh; ++p) sum += c[i * kCh * kCh + p];
    pooled[i] = static_cast<float>(sum / (kCh * kCh));
  }
  const std::vector<float> h = testing::RefRelu(
      testing::RefDense(pooled, Hidden(hidden), HiddenBias(hidden), rows, kCc, hidden));
  return testing::RefDense(h, Logits(hidden), std::vector<float>(kOut, 0.0f), rows, hidden, kOut);
}

// Kernels of the whole-batch tail in `model`'s program.
int TailKernels(const runtime::CompiledModel& model) {
  int n = 0;
  for (const KernelCall& k : model.program().kernels) {
    n += k.name.rfind(runtime::kTailKernelPrefix, 0) == 0;
  }
  return n;
}

// Runs `model` (the classifier at `rows` rows) on pseudorandom images
// seeded by `seed` and checks ClassifierReference's logits.
void ExpectClassifies(runtime::CompiledModel& model, int64_t rows, uint32_t seed,
                      int64_t hidden = kHidden) {
  const std::vector<float> x = Pseudorandom(rows * 3 * kCh * kCh, seed);
  absl::StatusOr<Tensor> in = Tensor::FromBytes(
      {DType::kFloat32, {rows, 3, kCh, kCh}},
      absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  ASSERT_TRUE(in.ok());
  absl::StatusOr<runtime::RunResult> r = model.Run({&*in});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs[0].type(), (TensorType{DType::kFloat32, {rows, kOut}}));
  EXPECT_EQ(r->kernel_times.size(), model.program().kernels.size());
  const std::vector<float> want = ClassifierReference(x, rows, hidden);
  const float* y = static_cast<const float*>(r->outputs[0].data());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(y[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << i;
  }
}

class RowChunksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelManagerOptions options;
    options.cache.dir.clear();
    auto m = ModelManager::Create(options);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void TearDown() override { runtime::SetParallelThreads(1); }

  ModelForRows Compiler(std::function<Graph(int64_t)> build) {
    return [this, build](int64_t rows) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
      const std::string name = absl::StrCat("rows", rows, "_", ++compiles_);
      absl::StatusOr<CompileResult> r = manager_->Compile(name, build(rows), CompileOptions{});
      if (!r.ok()) return r.status();
      return manager_->Find(name);
    };
  }

  // Heads and tails of `build`'s graphs, compiled as models of their own.
  TailCompiler Tails(std::function<Graph(int64_t)> build) {
    TailCompiler tail;
    tail.graph_for = [build](int64_t rows) -> absl::StatusOr<Graph> { return build(rows); };
    tail.compile =
        [this](Graph part,
               const std::string& what) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
      const std::string name = absl::StrCat(what, "_", ++compiles_);
      absl::StatusOr<CompileResult> r = manager_->Compile(name, std::move(part), CompileOptions{});
      if (!r.ok()) return r.status();
      return manager_->Find(name);
    };
    return tail;
  }

  void ExpectReference(runtime::CompiledModel& model, int64_t rows) {
    const std::vector<float> x = Pseudorandom(rows * kC * kH * kW, 7);
    absl::StatusOr<Tensor> in = Tensor::FromBytes(
        {DType::kFloat32, {rows, kC, kH, kW}},
        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
    ASSERT_TRUE(in.ok());
    absl::StatusOr<runtime::RunResult> r = model.Run({&*in});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs[0].type(), (TensorType{DType::kFloat32, {rows, kClasses}}));
    const float* y = static_cast<const float*>(r->outputs[0].data());
    const std::vector<float> want = Reference(x, rows);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-5) << i;
    // Each kernel timed once per call, over every slice.
    EXPECT_EQ(r->kernel_times.size(), model.program().kernels.size());
  }

  std::unique_ptr<ModelManager> manager_;
  int compiles_ = 0;
};

TEST_F(RowChunksTest, EverySliceSizeComputesTheWholeBatch) {
  for (int threads : {1, 2}) {
    runtime::SetParallelThreads(threads);
    for (int64_t slice : {1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat(threads, " threads, slices of ", slice));
      RowChunkReport why;
      absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model =
          RowChunkedModel(ConvNet(6), 6, RowChunkSetting{slice}, Compiler(ConvNet), &why);
      ASSERT_TRUE(model.ok()) << model.status();
      ASSERT_NE(*model, nullptr) << why.why_whole;
      EXPECT_EQ((*model)->row_chunks(), 6 / slice);
      EXPECT_EQ((*model)->program().values[(*model)->program().inputs[0]].type.shape[0], 6);
      ExpectReference(**model, 6);
    }
  }
}

TEST_F(RowChunksTest, AGraphMixingRowsRunsWhole) {
  // x - mean over the batch: every row reads every other.
  auto centred = [](int64_t rows) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {rows, 4}});
    g.AddOutput(Op(g, "sub", {x, Op(g, "mean", {x}, ReduceAttrs{{0}, true})}), "y");
    return Typed(std::move(g));
  };
  RowChunkReport why;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model =
      RowChunkedModel(centred(4), 4, RowChunkSetting{1}, Compiler(centred), &why);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, nullptr);
  EXPECT_THAT(why.why_whole, HasSubstr("mean"));
  EXPECT_EQ(compiles_, 0);
}

TEST_F(RowChunksTest, ASliceThatDoesNotDivideTheBatchRunsWhole) {
  RowChunkReport why;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model =
      RowChunkedModel(ConvNet(6), 6, RowChunkSetting{4}, Compiler(ConvNet), &why);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(*model, nullptr);
  EXPECT_THAT(why.why_whole, HasSubstr("divide"));
}

// The classifier's weights read once for the whole batch, not per slice:
// the slices stop at the pooled features and a whole-batch tail does the
// dense layers. A small weight is not worth a tail.
TEST_F(RowChunksTest, AClassifierHeadRunsOnceForTheWholeBatch) {
  const Node* cut = WholeBatchTailCut(ConvClassifier(6), 6);
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ(cut->op_name(), "mean");
  EXPECT_EQ(WholeBatchTailCut(ConvNet(6), 6), nullptr);  // 16 KB of dense weights

  const TailCompiler tail = Tails(Classifier());
  for (int threads : {1, 2}) {
    runtime::SetParallelThreads(threads);
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    RowChunkReport why;
    absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model = RowChunkedModel(
        ConvClassifier(6), 6, RowChunkSetting{1}, Compiler(Classifier()), &why, &tail);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_NE(*model, nullptr) << why.why_whole;
    EXPECT_EQ(why.why_no_tail, "");
    EXPECT_EQ((*model)->row_chunks(), 6);
    EXPECT_GE(TailKernels(**model), 1);
    for (const KernelCall& k : (*model)->program().kernels) {
      if (k.name.rfind(runtime::kTailKernelPrefix, 0) == 0) continue;
      EXPECT_EQ(k.name.find("dense"), std::string::npos) << k.name << " runs in the slices";
    }
    for (int run = 0; run < 2; ++run) ExpectClassifies(**model, 6, 15);
  }
}

// The rule, on the two kinds of model it weighs: a conv whose batch of
// outputs is larger than L2 and one image's is not, with few weights used
// at every pixel; and a dense layer whose one row uses each of its many
// weights once.
TEST_F(RowChunksTest, TheRuleSplitsACacheBoundConvAndKeepsADenseLayerWhole) {
  auto dense = [](int64_t rows) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {rows, 1024}});
    g.AddOutput(Op(g, "dense", {x, g.AddConstant("w", testing::FloatConstant({2048, 1024}, 0.5f))}),
                "y");
    return g;
  };
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> one_conv = Compiler(WideConv)(1);
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> one_dense = Compiler(dense)(1);
  ASSERT_TRUE(one_conv.ok() && one_dense.ok());
  EXPECT_EQ(ChunkRowsFor((*one_conv)->program(), 16), 1);
  EXPECT_EQ(ChunkRowsFor((*one_dense)->program(), 16), 16);
  // A row larger than any L2 (4 MiB): no slice keeps it in cache, and the
  // search stops at once however large the batch, not after 2^40 tries.
  auto wide_rows = [](int64_t rows) {
    Graph g;
    Node* x = g.AddInput("x", {DType::kFloat32, {rows, int64_t{1} << 20}});
    g.AddOutput(Op(g, "relu", {x}), "y");
    return g;
  };
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> one_wide = Compiler(wide_rows)(1);
  ASSERT_TRUE(one_wide.ok()) << one_wide.status();
  EXPECT_EQ(ChunkRowsFor((*one_wide)->program(), int64_t{1} << 40), int64_t{1} << 40);
}

// With a tail the rule weighs the head alone. A classifier whose dense
// layers hold 1.3 MB: weighed whole, one-row slices would stream them 8
// times (9 MB) to keep 4.7 MB of conv outputs in cache, so the whole
// program's rule takes slices of 2 rows (or none); the head alone streams
// only the conv's 3 KB, so the batch runs as 8 slices of one row and the
// dense layers once, in the tail.
TEST_F(RowChunksTest, TheRuleWeighsTheHeadAloneWhenATailTakesTheWeights) {
  constexpr int64_t kWide = 8192, kRows = 8;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> one_row = Compiler(Classifier(kWide))(1);
  ASSERT_TRUE(one_row.ok()) << one_row.status();
  EXPECT_GT(ChunkRowsFor((*one_row)->program(), kRows), 1);

  const TailCompiler tail = Tails(Classifier(kWide));
  RowChunkReport why;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model =
      RowChunkedModel(ConvClassifier(kRows, kWide), kRows, RowChunkSetting{},
                      Compiler(Classifier(kWide)), &why, &tail);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE(*model, nullptr) << why.why_whole;
  EXPECT_EQ(why.why_no_tail, "");
  EXPECT_EQ((*model)->row_chunks(), kRows);
  EXPECT_GE(TailKernels(**model), 1);
  ExpectClassifies(**model, kRows, 17, kWide);
}

// A tail that does not compile leaves the slices whole-graph, and says so.
TEST_F(RowChunksTest, ATailThatDoesNotCompileIsReportedAndTheSlicesRunWhole) {
  TailCompiler tail = Tails(Classifier());
  auto compile = tail.compile;
  tail.compile = [compile](Graph part, const std::string& what)
      -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
    if (what == "tail") return absl::ResourceExhaustedError("no room for the tail");
    return compile(std::move(part), what);
  };
  RowChunkReport why;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model = RowChunkedModel(
      ConvClassifier(6), 6, RowChunkSetting{1}, Compiler(Classifier()), &why, &tail);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE(*model, nullptr) << why.why_whole;
  EXPECT_THAT(why.why_no_tail, HasSubstr("no room for the tail"));
  EXPECT_EQ((*model)->row_chunks(), 6);
  EXPECT_EQ(TailKernels(**model), 0);
  ExpectClassifies(**model, 6, 18);
}

// A manager as the server makes one (memory-only cache), with row chunks
// on or off.
absl::StatusOr<std::unique_ptr<ModelManager>> ServingManager(bool row_chunks) {
  ModelManagerOptions options;
  options.cache.dir.clear();
  if (!row_chunks) options.row_chunks.rows = RowChunkSetting::kOff;
  return ModelManager::Create(options);
}

// Through the server's path: a model with a symbolic batch gets its batch-8
// variant as 8 slices of its batch-1 one, unless row chunks are off.
TEST(RowChunksServingTest, ABatchOfASymbolicModelRunsAsSlicesOfItsOneRowVariant) {
  for (bool on : {true, false}) {
    SCOPED_TRACE(on);
    absl::StatusOr<std::unique_ptr<ModelManager>> manager = ServingManager(on);
    ASSERT_TRUE(manager.ok());
    SymbolicModel symbolic;
    const std::vector<std::string> symbols{"batch", "", "", ""};
    symbolic.signature.inputs.push_back({"x", DType::kFloat32, {-1, 16, 96, 96}, symbols});
    symbolic.signature.outputs.push_back({"y", DType::kFloat32, {-1, 16, 96, 96}, symbols});
    symbolic.graph_for = [](const ShapeBinding& s, const ValueBinding&) -> absl::StatusOr<Graph> {
      return WideConv(s.at("x")[0]);
    };
    ASSERT_TRUE((*manager)
                    ->CompileWithShapes("m", WideConv(1), std::move(symbolic), CompileOptions{})
                    .ok());
    auto model = (*manager)->FindForShapes("m", {{8, 16, 96, 96}});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->row_chunks(), on ? 8 : 1);
    const std::vector<float> x = Pseudorandom(8 * 16 * 96 * 96, 9);
    absl::StatusOr<Tensor> in = Tensor::FromBytes(
        {DType::kFloat32, {8, 16, 96, 96}},
        absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
    ASSERT_TRUE(in.ok());
    absl::StatusOr<runtime::RunResult> r = (*model)->Run({&*in});
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> want = testing::RefRelu(testing::RefConv2DStrided(
        x, Pseudorandom(2304, 5), {}, 8, 16, 96, 96, 16, 3, 3, /*stride=*/1, /*pad=*/1));
    const float* y = static_cast<const float*>(r->outputs[0].data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-4) << i;

    // Two variants loaded (batch 1 and 8); in slices the batch-8 one holds
    // the batch-1 one's weights rather than its own, counted once.
    std::optional<ServedModel> served = (*manager)->Get("m");
    ASSERT_TRUE(served.has_value());
    const ModelMemory memory = MemoryOf(*served);
    EXPECT_EQ(memory.variants, 2);
    const int64_t weights = 16 * 16 * 3 * 3 * sizeof(float);
    EXPECT_EQ(memory.footprint.constant_bytes, (on ? 1 : 2) * weights);
  }
}

// A model exported at a fixed batch of 8, its flatten's reshape to [8, 32]
// baked in: it runs as 8 slices of its graph at one row (GraphAtRows) and a
// whole-batch tail, unless row chunks are off.
TEST(RowChunksServingTest, AFixedBatchModelRunsAsSlicesOfItsGraphAtOneRow) {
  for (bool on : {true, false}) {
    SCOPED_TRACE(on);
    absl::StatusOr<std::unique_ptr<ModelManager>> manager = ServingManager(on);
    ASSERT_TRUE(manager.ok());
    absl::StatusOr<CompileResult> compiled =
        (*manager)->Compile("c", ConvClassifier(8), CompileOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    std::shared_ptr<runtime::CompiledModel> model = (*manager)->Find("c");
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->row_chunks(), on ? 8 : 1);
    EXPECT_EQ(TailKernels(*model) > 0, on);
    // The report names what runs: the slices' kernels, then the tail's.
    ASSERT_EQ(compiled->kernels.size(), model->program().kernels.size());
    for (size_t k = 0; k < compiled->kernels.size(); ++k) {
      EXPECT_EQ(compiled->kernels[k].name, model->program().kernels[k].name);
    }
    ExpectClassifies(*model, 8, 19);
  }
}

// The whole batch's limits hold for a fixed batch: its conv output (4.5
// MiB at batch 8) is larger than a 3 MiB budget, though one row's (576 KiB)
// is not, so the model is refused, naming the flag, rather than run as
// slices whose calls would allocate it outside the budget.
TEST(RowChunksServingTest, AFixedBatchLargerThanTheBudgetIsRefusedThoughARowFits) {
  ModelManagerOptions options;
  options.cache.dir.clear();
  options.max_loaded_bytes = int64_t{3} << 20;
  auto manager = ModelManager::Create(options);
  ASSERT_TRUE(manager.ok());
  absl::Status s = (*manager)->Compile("w", WideConv(8), CompileOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-loaded-mb"));
  EXPECT_TRUE((*manager)->Compile("w1", WideConv(1), CompileOptions{}).ok());
}

// Through the server's path too: the batch-8 variant of a symbolic
// classifier is slices of its pooled features and a whole-batch tail.
TEST(RowChunksServingTest, AClassifierVariantHasAWholeBatchTail) {
  absl::StatusOr<std::unique_ptr<ModelManager>> manager = ServingManager(true);
  ASSERT_TRUE(manager.ok());
  SymbolicModel symbolic;
  symbolic.signature.inputs.push_back(
      {"x", DType::kFloat32, {-1, 3, kCh, kCh}, {"batch", "", "", ""}});
  symbolic.signature.outputs.push_back({"y", DType::kFloat32, {-1, kOut}, {"batch", ""}});
  symbolic.graph_for = [](const ShapeBinding& s, const ValueBinding&) -> absl::StatusOr<Graph> {
    return ConvClassifier(s.at("x")[0]);
  };
  ASSERT_TRUE((*manager)
                  ->CompileWithShapes("c", ConvClassifier(1), std::move(symbolic), CompileOptions{})
                  .ok());
  auto model = (*manager)->FindForShapes("c", {{8, 3, kCh, kCh}});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->row_chunks(), 8);
  EXPECT_GE(TailKernels(**model), 1);
  ExpectClassifies(**model, 8, 16);
}

}  // namespace
}  // namespace kiln::engine
