// Prometheus's text exposition format (version 0.0.4), written by hand: no
// Debian package fits. prometheus-cpp (Debian's prometheus-cpp-dev) owns its
// counters and serves them through its own embedded civetweb server, while
// Kiln's numbers already live in the engine's stores and are read at scrape
// time, and Kiln already serves HTTP with cpp-httplib. The format is small:
// a family's "# HELP" and "# TYPE" lines, then its samples.
#ifndef KILN_SERVER_METRICS_PROMETHEUS_TEXT_H_
#define KILN_SERVER_METRICS_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace kiln::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A label value with \, " and newline escaped as the format wants.
std::string EscapeLabelValue(absl::string_view value);

class PrometheusText {
 public:
  // Opens the family `name`: its HELP and TYPE lines ("counter", "gauge",
  // "histogram"). Its samples follow, before the next family.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  // One sample line; `name` is the family's, with a suffix for histograms.
  void Sample(absl::string_view name, const Labels& labels, double value);
  // A histogram's samples: `counts` per bucket (not cumulative, the last
  // one above the last bound), `bounds` ascending; written cumulative with
  // le="+Inf", then _sum and _count.
  void Histogram(absl::string_view name, const Labels& labels, const std::vector<double>& bounds,
                 const std::vector<int64_t>& counts, double sum);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_METRICS_PROMETHEUS_TEXT_H_
