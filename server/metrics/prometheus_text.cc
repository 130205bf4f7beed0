#include "server/metrics/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

// Integers exactly (counters go past float's 2^24); others to 17 digits.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  // The shortest of 15 or 17 digits that reads back as `v` (0.0001, not
  // 0.00010000000000000000479).
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", v);
  if (std::strtod(buffer, nullptr) != v) std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, labels[i].first, "=\"", EscapeLabelValue(labels[i].second), "\"");
  }
  return out + "}";
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  absl::StrAppend(&text_, "# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " ", type,
                  "\n");
}

void PrometheusText::Sample(absl::string_view name, const Labels& labels, double value) {
  absl::StrAppend(&text_, name, FormatLabels(labels), " ", FormatValue(value), "\n");
}

void PrometheusText::Histogram(absl::string_view name, const Labels& labels,
                               const std::vector<double>& bounds,
                               const std::vector<int64_t>& counts, double sum) {
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size() && i < counts.size(); ++i) {
    cumulative += counts[i];
    Labels with_le = labels;
    with_le.emplace_back("le", i < bounds.size() ? FormatValue(bounds[i]) : "+Inf");
    Sample(absl::StrCat(name, "_bucket"), with_le, static_cast<double>(cumulative));
  }
  Sample(absl::StrCat(name, "_sum"), labels, sum);
  Sample(absl::StrCat(name, "_count"), labels, static_cast<double>(cumulative));
}

}  // namespace kiln::server
