#include "server/metrics/prometheus_text.h"

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(PrometheusTextTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain-name.v2"), "plain-name.v2");
}

TEST(PrometheusTextTest, FamiliesSamplesAndValues) {
  PrometheusText out;
  out.Family("kiln_x_total", "counter", "Line one\nline \\two.");
  out.Sample("kiln_x_total", {{"model", "m\"1"}, {"version", "2"}}, 12345678901234.0);
  out.Sample("kiln_x_total", {}, 0.25);
  out.Sample("kiln_x_total", {}, 0.1);
  EXPECT_EQ(out.text(),
            "# HELP kiln_x_total Line one\\nline \\\\two.\n"
            "# TYPE kiln_x_total counter\n"
            "kiln_x_total{model=\"m\\\"1\",version=\"2\"} 12345678901234\n"
            "kiln_x_total 0.25\n"
            "kiln_x_total 0.1\n");
}

TEST(PrometheusTextTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  PrometheusText out;
  out.Family("h", "histogram", "H.");
  out.Histogram("h", {{"model", "m"}}, {0.001, 0.5}, {2, 0, 3}, 4.5);
  EXPECT_EQ(out.text(),
            "# HELP h H.\n# TYPE h histogram\n"
            "h_bucket{model=\"m\",le=\"0.001\"} 2\n"
            "h_bucket{model=\"m\",le=\"0.5\"} 2\n"
            "h_bucket{model=\"m\",le=\"+Inf\"} 5\n"
            "h_sum{model=\"m\"} 4.5\n"
            "h_count{model=\"m\"} 5\n");
}

}  // namespace
}  // namespace kiln::server
