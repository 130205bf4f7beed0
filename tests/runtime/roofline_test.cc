// The host peaks are plausible (positive, ordered, below hard ceilings) and the
// roofline fractions are computed as defined. No timed assertions: how fast
// kernels run is for benchmarks, not tests.
#include "runtime/roofline.h"

#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "runtime/host_peaks.h"

namespace kiln::runtime {
namespace {

TEST(HostPeaksTest, MeasuredPeaksArePlausible) {
  const HostPeaks& p = CachedHostPeaks();
  std::printf(
      "%s (%s, %d cores): FMA %.1f / %.1f GFLOPS, triad %.1f / %.1f GB/s over 3 x %lld "
      "MiB; measured in %.0f ms\n",
      p.cpu_name.c_str(), p.isa.c_str(), p.cores, p.fma_gflops_one_thread, p.fma_gflops_all_threads,
      p.stream_gbps_one_thread, p.stream_gbps_all_threads,
      static_cast<long long>(p.stream_array_bytes >> 20), p.measure_ms);
  EXPECT_FALSE(p.cpu_name.empty());
  EXPECT_FALSE(p.isa.empty());
  EXPECT_EQ(p.cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // Positive, and under generous physical ceilings: 10 TFLOPS per core
  // (64 flops/cycle at 10 GHz is 640 GFLOPS) and 10 TB/s.
  EXPECT_GT(p.fma_gflops_one_thread, 0);
  EXPECT_LT(p.fma_gflops_one_thread, 1e4);
  EXPECT_GT(p.fma_gflops_all_threads, 0);
  EXPECT_LT(p.fma_gflops_all_threads, 1e4 * p.cores);
  EXPECT_GT(p.stream_gbps_one_thread, 0);
  EXPECT_LT(p.stream_gbps_all_threads, 1e4);
  EXPECT_GE(p.stream_array_bytes, int64_t{32} << 20);
  // Cached: the same object every time.
  EXPECT_EQ(&CachedHostPeaks(), &p);
}

TEST(HostPeaksTest, ThreadCountScalesOneThreadCappedAtAllCores) {
  HostPeaks p;
  p.fma_gflops_one_thread = 100;
  p.fma_gflops_all_threads = 180;
  p.stream_gbps_one_thread = 20;
  p.stream_gbps_all_threads = 30;
  EXPECT_DOUBLE_EQ(p.FmaGflops(1), 100);
  EXPECT_DOUBLE_EQ(p.FmaGflops(2), 180);
  EXPECT_DOUBLE_EQ(p.FmaGflops(8), 180);
  EXPECT_DOUBLE_EQ(p.StreamGbps(0), 20);
  EXPECT_DOUBLE_EQ(p.StreamGbps(2), 30);
}

TEST(RooflineTest, FractionsAsDefined) {
  // 3.6 GFLOP and 50 MB in 20 ms: 180 GFLOPS, 2.5 GB/s.
  const Roofline r = ComputeRoofline(3.6e9, 50'000'000, 0.020, 240, 10);
  EXPECT_DOUBLE_EQ(r.gflops, 180);
  EXPECT_DOUBLE_EQ(r.gbps, 2.5);
  EXPECT_DOUBLE_EQ(r.fma_fraction, 0.75);
  EXPECT_DOUBLE_EQ(r.bandwidth_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.bound_fraction(), 0.75);
}

TEST(RooflineTest, ThreadsPickThePeaks) {
  HostPeaks p;
  p.fma_gflops_one_thread = 100;
  p.fma_gflops_all_threads = 200;
  p.stream_gbps_one_thread = 10;
  p.stream_gbps_all_threads = 16;
  const Roofline r = ComputeRoofline(1e9, 1'000'000'000, 0.1, p, 2);  // 10 GFLOPS, 10 GB/s
  EXPECT_DOUBLE_EQ(r.peak_gflops, 200);
  EXPECT_DOUBLE_EQ(r.peak_gbps, 16);
  EXPECT_DOUBLE_EQ(r.fma_fraction, 0.05);
  EXPECT_DOUBLE_EQ(r.bandwidth_fraction, 10.0 / 16);
}

TEST(RooflineTest, NoTimeOrNoPeakGivesZerosNotInfinities) {
  const Roofline none = ComputeRoofline(1e9, 1000, 0, 100, 10);
  EXPECT_EQ(none.gflops, 0);
  EXPECT_EQ(none.fma_fraction, 0);
  const Roofline no_peak = ComputeRoofline(1e9, 1000, 1, 0, 0);
  EXPECT_DOUBLE_EQ(no_peak.gflops, 1);
  EXPECT_EQ(no_peak.fma_fraction, 0);
  EXPECT_EQ(no_peak.bandwidth_fraction, 0);
}

}  // namespace
}  // namespace kiln::runtime
