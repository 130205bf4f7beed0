#include "engine/latency_histogram.h"

#include <algorithm>

namespace kiln::engine {

void LatencyHistogram::Add(int64_t ns) {
  const double seconds = static_cast<double>(ns) * 1e-9;
  const auto bound =
      std::lower_bound(kLatencyBucketsSeconds.begin(), kLatencyBucketsSeconds.end(), seconds);
  ++counts[bound - kLatencyBucketsSeconds.begin()];
  ++count;
  sum_ns += ns;
}

}  // namespace kiln::engine
