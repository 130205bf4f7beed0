#include "runtime/duration_stats.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

namespace {
template <typename T>
T NearestRank(const std::vector<T>& sorted, double q) {
  if (sorted.empty()) return T{};
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t index = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}
}  // namespace

int64_t Percentile(const std::vector<int64_t>& sorted, double q) { return NearestRank(sorted, q); }
double Percentile(const std::vector<double>& sorted, double q) { return NearestRank(sorted, q); }

void DurationStats::Add(int64_t ns) {
  min_ns_ = count_ == 0 ? ns : std::min(min_ns_, ns);
  max_ns_ = std::max(max_ns_, ns);
  total_ns_ += ns;
  if (count_++ == 0) {
    first_ns_ = ns;
    return;
  }
  if (window_.size() < kWindow) {
    window_.push_back(ns);
  } else {
    window_[next_] = ns;
    next_ = (next_ + 1) % kWindow;
  }
}

DurationSnapshot DurationStats::Snapshot() const {
  DurationSnapshot s;
  s.count = count_;
  s.total_ns = total_ns_;
  s.min_ns = min_ns_;
  s.max_ns = max_ns_;
  s.first_ns = first_ns_;
  s.steady_count = count_ > 0 ? count_ - 1 : 0;
  s.steady_total_ns = total_ns_ - first_ns_;
  std::vector<int64_t> sorted = window_;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    double sum = 0;
    for (int64_t v : sorted) sum += static_cast<double>(v);
    s.steady_mean_ns = sum / static_cast<double>(sorted.size());
  }
  s.p50_ns = Percentile(sorted, 0.5);
  s.p90_ns = Percentile(sorted, 0.9);
  s.p99_ns = Percentile(sorted, 0.99);
  return s;
}

}  // namespace kiln::runtime
