// Run-time statistics for one kernel or one model: cumulative counters, the
// first call apart from the steady state, and percentiles over recent calls.
#ifndef KILN_RUNTIME_DURATION_STATS_H_
#define KILN_RUNTIME_DURATION_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::runtime {

struct DurationSnapshot {
  int64_t count = 0;  // all calls
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  int64_t first_ns = 0;  // the first call (0 before any)
  int64_t steady_count = 0;
  int64_t steady_total_ns = 0;
  double steady_mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
};

// Not thread-safe: the owner locks.
class DurationStats {
 public:
  // Percentiles are over at most this many recent steady-state calls.
  static constexpr int kWindow = 4096;

  void Add(int64_t ns);
  DurationSnapshot Snapshot() const;

 private:
  int64_t count_ = 0;
  int64_t total_ns_ = 0;
  int64_t min_ns_ = 0;
  int64_t max_ns_ = 0;
  int64_t first_ns_ = 0;
  std::vector<int64_t> window_;  // ring buffer of steady-state samples
  size_t next_ = 0;
};

// The nearest-rank percentile (q in [0, 1]) of `sorted`; 0 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double q);
double Percentile(const std::vector<double>& sorted, double q);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_DURATION_STATS_H_
