#include "runtime/roofline.h"

#include <algorithm>

namespace kiln::runtime {

double Roofline::bound_fraction() const { return std::max(fma_fraction, bandwidth_fraction); }

Roofline ComputeRoofline(double flops, int64_t bytes, double seconds, double peak_gflops,
                         double peak_gbps) {
  Roofline r;
  r.peak_gflops = peak_gflops;
  r.peak_gbps = peak_gbps;
  if (seconds <= 0) return r;
  r.gflops = flops / seconds / 1e9;
  r.gbps = static_cast<double>(bytes) / seconds / 1e9;
  if (peak_gflops > 0) r.fma_fraction = r.gflops / peak_gflops;
  if (peak_gbps > 0) r.bandwidth_fraction = r.gbps / peak_gbps;
  return r;
}

Roofline ComputeRoofline(double flops, int64_t bytes, double seconds, const HostPeaks& peaks,
                         int threads) {
  return ComputeRoofline(flops, bytes, seconds, peaks.FmaGflops(threads),
                         peaks.StreamGbps(threads));
}

}  // namespace kiln::runtime
