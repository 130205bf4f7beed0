#include "bench/bench_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::bench {

absl::StatusOr<int> BenchArgs::GetInt(const std::string& name, int fallback, int min) const {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  int v;
  if (!absl::SimpleAtoi(it->second, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " takes an integer >= ", min, ", got '", it->second, "'"));
  }
  return v;
}

std::string BenchArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

absl::StatusOr<BenchArgs> ParseBenchArgs(int argc, char** argv,
                                         const std::set<std::string>& value_flags,
                                         const std::set<std::string>& boolean_flags) {
  BenchArgs args;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
      args.positional.push_back(word);
      continue;
    }
    std::string name = word.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (boolean_flags.count(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      args.switches.insert(name);
      continue;
    }
    if (!value_flags.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", name, " wants a value"));
      value = argv[++i];
    }
    args.values[name] = value;
  }
  return args;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

LatencySummary Summarize(std::vector<double> ms) {
  LatencySummary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.p50 = Percentile(ms, 0.5);
  s.p90 = Percentile(ms, 0.9);
  s.p95 = Percentile(ms, 0.95);
  s.p99 = Percentile(ms, 0.99);
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.min = ms.front();
  s.max = ms.back();
  return s;
}

void FillPseudorandom(float* data, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    data[i] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24) - 0.5f;
  }
}

}  // namespace kiln::bench
