#include "client/report_format.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;

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

TEST(ReportFormatTest, JsonUsesProtoFieldNames) {
  kiln::v1::GetCacheStatsResponse s;
  s.set_entries(3);
  EXPECT_THAT(ToJson(s), HasSubstr("\"compile_ms_saved\": 0"));
}

}  // namespace
}  // namespace kiln::client
