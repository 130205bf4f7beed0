#include "bench/bench_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>


namespace kiln::bench {

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
