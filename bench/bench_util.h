// What the bench tools share: nearest-rank latency percentiles and a
// pseudorandom fill (their flags parse with client/cli_app.h). Benchmarks are run
// by hand; nothing here is a test.
#ifndef KILN_BENCH_BENCH_UTIL_H_
#define KILN_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <vector>

namespace kiln::bench {

// perf_analyzer-style summary of per-call latencies in milliseconds.
struct LatencySummary {
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, mean = 0, min = 0, max = 0;
};
LatencySummary Summarize(std::vector<double> ms);

// The nearest-rank percentile (q in (0, 1]) of `sorted`; 0 when empty.
double Percentile(const std::vector<double>& sorted, double q);

// Uniform values in [-0.5, 0.5) from a fixed LCG (what `kiln bench` sends).
void FillPseudorandom(float* data, int64_t n, uint32_t seed);

}  // namespace kiln::bench

#endif  // KILN_BENCH_BENCH_UTIL_H_
