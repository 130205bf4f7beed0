// The host's two roofline limits, measured: the FMA peak and the STREAM-triad
// bandwidth, each on one thread and on every core. A kernel's GFLOPS and GB/s
// are reported as fractions of these (roofline.h), so a user sees which
// kernels are far from what this machine can do -- not from a datasheet's.
#ifndef KILN_RUNTIME_HOST_PEAKS_H_
#define KILN_RUNTIME_HOST_PEAKS_H_

#include <cstdint>
#include <string>

namespace kiln::runtime {

struct HostPeaks {
  std::string cpu_name;  // /proc/cpuinfo's "model name", or "unknown"
  std::string isa;       // the FMA loop's: "avx512f", "avx2+fma" or "scalar"
  int cores = 1;         // threads of the all-core measurements
  double fma_gflops_one_thread = 0;
  double fma_gflops_all_threads = 0;
  double stream_gbps_one_thread = 0;
  double stream_gbps_all_threads = 0;
  int64_t stream_array_bytes = 0;  // each of the triad's three arrays
  double measure_ms = 0;           // what measuring cost

  // The limits for a kernel running on `threads` threads: one thread's value
  // times `threads`, capped at the all-core measurement.
  double FmaGflops(int threads) const;
  double StreamGbps(int threads) const;
};

// /proc/cpuinfo's "model name" ("Intel(R) Xeon(R) Processor"), or "unknown".
std::string CpuModelName();

// Measures now (tens to a few hundred milliseconds, mostly filling the triad's
// arrays). Every figure is the best of a few runs.
HostPeaks MeasureHostPeaks();

// MeasureHostPeaks() once per process; later calls return the same figures.
const HostPeaks& CachedHostPeaks();

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_HOST_PEAKS_H_
