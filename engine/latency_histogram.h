// A latency distribution in fixed buckets, for the Prometheus page: the
// per-model request histograms and the remote cache tier's lookups share it.
#ifndef KILN_ENGINE_LATENCY_HISTOGRAM_H_
#define KILN_ENGINE_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace kiln::engine {

// Upper bounds in seconds, ascending; +Inf is implied after the last.
// 100 us to 10 s: a small model's inline call to a first-use compile.
inline constexpr std::array<double, 16> kLatencyBucketsSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

struct LatencyHistogram {
  // counts[i]: observations <= kLatencyBucketsSeconds[i] and above the
  // bound before (not cumulative); the last entry is those above 10 s.
  std::array<int64_t, kLatencyBucketsSeconds.size() + 1> counts{};
  int64_t count = 0;
  int64_t sum_ns = 0;
  void Add(int64_t ns);
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_LATENCY_HISTOGRAM_H_
