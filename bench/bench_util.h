// What the bench tools share: flag parsing in the CLI's `--name value` style,
// nearest-rank latency percentiles, and a pseudorandom fill. Benchmarks are run
// by hand; nothing here is a test.
#ifndef KILN_BENCH_BENCH_UTIL_H_
#define KILN_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::bench {

struct BenchArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // the last value given wins
  std::set<std::string> switches;

  bool Has(const std::string& name) const { return switches.count(name) > 0; }
  // InvalidArgument when the value is not an integer >= `min`.
  absl::StatusOr<int> GetInt(const std::string& name, int fallback, int min) const;
  std::string Get(const std::string& name, const std::string& fallback = "") const;
};

// `--name value`, `--name=value` and boolean `--name`; InvalidArgument for a
// flag not in either set or a value flag without a value.
absl::StatusOr<BenchArgs> ParseBenchArgs(int argc, char** argv,
                                         const std::set<std::string>& value_flags,
                                         const std::set<std::string>& boolean_flags);

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
