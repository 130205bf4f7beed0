#include "client/report_format.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ReportFormatTest, CompileReportShowsPassesAndKernels) {
  kiln::v1::CompileModelResponse r;
  r.set_model_name("mlp");
  auto* p = r.mutable_report()->add_passes();
  p->set_name("FoldScaleAxis");
  p->set_depth(1);
  p->set_skipped(true);
  p->set_skip_reason("opt_level 3 > 2");
  auto* k = r.mutable_report()->add_kernels();
  k->set_name("fused_dense_relu_0");
  k->add_ops("dense");
  k->add_ops("relu");
  k->set_key("00ff");
  k->set_cache_hit(true);
  const std::string text = FormatCompileReport(r);
  EXPECT_THAT(text, HasSubstr("  FoldScaleAxis"));
  EXPECT_THAT(text, HasSubstr("skipped (opt_level 3 > 2)"));
  EXPECT_THAT(text, HasSubstr("dense+relu"));
  EXPECT_THAT(text, HasSubstr("hit"));
}

TEST(ReportFormatTest, InferResultShowsLeadingValuesAndKernelTimes) {
  InferResult result;
  NpyArray a{"FP32", {2}, std::string(8, '\0')};
  const float v[2] = {0.25f, -1.5f};
  std::memcpy(a.data.data(), v, 8);
  result.outputs.push_back({"probs", a});
  result.kernels.push_back({0, "fused_softmax_0", 2500});
  result.total_ns = 3000;
  const std::string text = FormatInferResult(result);
  EXPECT_THAT(text, HasSubstr("probs: FP32[2] = [0.25, -1.5]"));
  EXPECT_THAT(text, HasSubstr("fused_softmax_0"));
  EXPECT_THAT(text, HasSubstr("2.500 us"));
}

TEST(ReportFormatTest, TimingStatsShowBatchesQueueAndShapes) {
  kiln::v1::GetTimingStatsResponse stats;
  kiln::v1::ModelTiming* m = stats.add_models();
  m->set_model_name("mlp");
  kiln::v1::InferBatchStatistics* b = m->add_batch_stats();
  b->set_batch_size(8);
  b->mutable_compute_infer()->set_count(4);
  b->mutable_compute_infer()->set_ns(2'000'000);  // 0.5 ms a run
  m->mutable_queue()->set_count(32);
  m->mutable_queue()->set_p50_ns(1500);
  m->mutable_queue()->set_p99_ns(9000);
  m->set_padded_rows(3);
  m->set_shape_compiles(2);
  m->set_shape_variants_loaded(1);
  kiln::v1::ShapeTiming* shape = m->add_shapes();
  shape->set_shape("x=[8,16]");
  shape->mutable_inference()->set_count(5);
  const std::string text = FormatTimingStats(stats);
  EXPECT_THAT(text, HasSubstr("batches: 8 x4 (run mean 0.500 ms)"));
  EXPECT_THAT(text, HasSubstr("queue: 32 requests, p50 1.500 us, p99 9.000 us; 3 padded rows"));
  EXPECT_THAT(text, HasSubstr("shapes: 1 loaded, 2 compiled besides the load-time one"));
  EXPECT_THAT(text, HasSubstr("x=[8,16]"));
  EXPECT_THAT(text, Not(HasSubstr("slices")));
}

TEST(ReportFormatTest, TimingStatsSayAFixedBatchRunsAsSlices) {
  kiln::v1::GetTimingStatsResponse stats;
  kiln::v1::ModelTiming* m = stats.add_models();
  m->set_model_name("cnn");
  m->set_inference_count(4);
  m->set_inference_total_ns(8'000'000);
  m->set_row_chunks(8);
  EXPECT_THAT(FormatTimingStats(stats),
              HasSubstr("model cnn: 4 inferences, mean 2000.000 us (as 8 slices)\n"));
}

TEST(ReportFormatTest, ModelsShowWhatEachHoldsAndTheBudget) {
  kiln::v1::ListModelsResponse models;
  kiln::v1::ModelSummary* m = models.add_models();
  m->set_name("mlp");
  kiln::v1::LoadedMemory* memory = m->mutable_memory();
  memory->set_total_bytes((int64_t{3} << 20) + 2048);
  memory->set_constant_bytes(int64_t{2} << 20);
  memory->set_workspace_bytes(int64_t{1} << 20);
  memory->set_code_bytes(2048);
  memory->set_shape_variants(2);
  models.set_loaded_bytes((int64_t{3} << 20) + 2048);
  models.set_max_loaded_bytes(int64_t{64} << 20);
  models.set_variants_unloaded(5);
  const std::string text = FormatModels(models);
  EXPECT_THAT(text, HasSubstr("  loaded 3.0 MiB (weights 2.0 MiB, intermediates 1.0 MiB, "
                              "code 2.0 KiB; 2 shapes)"));
  EXPECT_THAT(text, HasSubstr("loaded 3.0 MiB of 64.0 MiB (--max-loaded-mb); 5 shape "
                              "variants unloaded to make room"));
  memory->set_kernel_temp_bytes(int64_t{512} << 10);
  memory->set_total_bytes(memory->total_bytes() + (int64_t{512} << 10));
  EXPECT_THAT(FormatModels(models),
              HasSubstr("  loaded 3.5 MiB (weights 2.0 MiB, intermediates 1.0 MiB, kernel "
                        "temporaries 512.0 KiB, code 2.0 KiB; 2 shapes)"));
  EXPECT_EQ(FormatModels({}), "no models\n");  // a server without the budget says nothing
}

TEST(ReportFormatTest, ModelsNameTheVersionOnlyWhereANameHasSeveral) {
  kiln::v1::ListModelsResponse models;
  for (const auto& [name, version] :
       {std::pair<std::string, int64_t>{"add", 2}, {"add", 3}, {"mlp", 1}}) {
    kiln::v1::ModelSummary* m = models.add_models();
    m->set_name(name);
    m->set_version(version);
  }
  const std::string text = FormatModels(models);
  EXPECT_THAT(text, HasSubstr("add  version=2  kernels="));
  EXPECT_THAT(text, HasSubstr("add  version=3  kernels="));
  EXPECT_THAT(text, HasSubstr("mlp  kernels="));
  EXPECT_THAT(text, Not(HasSubstr("version=1")));
}

TEST(ReportFormatTest, JsonUsesProtoFieldNames) {
  kiln::v1::GetCacheStatsResponse s;
  s.set_entries(3);
  EXPECT_THAT(ToJson(s), HasSubstr("\"compile_ms_saved\": 0"));
}

}  // namespace
}  // namespace kiln::client
