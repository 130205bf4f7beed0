// One kernel's place on the roofline: achieved GFLOPS and GB/s from its FLOP
// and byte counts (KernelSpec::flops, ::bytes) and a measured time, and their
// fractions of the host's limits (host_peaks.h).
#ifndef KILN_RUNTIME_ROOFLINE_H_
#define KILN_RUNTIME_ROOFLINE_H_

#include <cstdint>

#include "runtime/host_peaks.h"

namespace kiln::runtime {

struct Roofline {
  double gflops = 0;              // flops / seconds / 1e9
  double gbps = 0;                // bytes / seconds / 1e9
  double peak_gflops = 0;         // the FMA peak for the thread count
  double peak_gbps = 0;           // the triad bandwidth for the thread count
  double fma_fraction = 0;        // gflops / peak_gflops
  double bandwidth_fraction = 0;  // gbps / peak_gbps
  // The larger fraction: how close the kernel is to whichever limit binds.
  double bound_fraction() const;
};

// Zero rates (not infinities) when `seconds` is not positive; zero fractions
// when a peak is not.
Roofline ComputeRoofline(double flops, int64_t bytes, double seconds, double peak_gflops,
                         double peak_gbps);

// The same against `peaks` at `threads` threads.
Roofline ComputeRoofline(double flops, int64_t bytes, double seconds, const HostPeaks& peaks,
                         int threads);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_ROOFLINE_H_
