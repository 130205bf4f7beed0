// Design note. Both limits are measured with code that cannot be faster than
// the hardware allows, so a kernel's fraction of them says how much room it
// has:
//
//   FMA peak   12 independent accumulators (more than FMA latency x ports on
//              any x86 core Kiln targets: 4 cycles x 2 ports = 8) updated by
//              vfmadd in the widest vector ISA the host has (AVX-512, else
//              AVX2+FMA), so the loop is bound by FMA throughput alone; the
//              ISA is chosen at run time (__builtin_cpu_supports) and each
//              loop is compiled for it with a target attribute, so this file
//              needs no -march and the binary still runs on older hosts.
//   bandwidth  STREAM's triad a[i] = b[i] + s*c[i] over three float arrays
//              larger than the last-level cache (bounded to keep the
//              measurement cheap), counted as STREAM counts: 12 bytes per
//              element, the write-allocate read not included.
//
// Each is timed on one thread and on every core (threads started together,
// the wall time of the slowest), best of several runs: on a shared machine any
// one run may lose its core. Measuring costs ~20 ms of FMA loops plus filling
// the triad's arrays (on a VM whose pages are faulted in by the hypervisor,
// a few hundred ms; that is why peaks are measured once per process).
// Neither touches the kernel thread pool: peaks are a property of the host.
#include "runtime/host_peaks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs `body(thread_index)` on `threads` threads at once; returns the wall
// seconds.
double RunOnThreads(int threads, const std::function<void(int)>& body) {
  if (threads <= 1) {
    const Clock::time_point start = Clock::now();
    body(0);
    return SecondsSince(start);
  }
  std::vector<std::thread> workers;
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < threads; ++t) workers.emplace_back(body, t);
  for (std::thread& w : workers) w.join();
  return SecondsSince(start);
}

constexpr int kAccumulators = 12;

// kAccumulators independent chains acc = acc * m + a, in GCC's generic
// vectors of `Vector`'s width: it converges to a / (1 - m) = 1, so no
// overflow, no denormals. Always inlined into the per-ISA wrappers below, so
// each is compiled for its target, where the multiply-add contracts to one
// vfmadd (GCC's default -ffp-contract=fast).
template <typename Vector>
__attribute__((always_inline)) inline float FmaChains(int64_t iterations) {
  const Vector m = Vector{} + 0.999999f, a = Vector{} + 1e-6f;
  Vector x[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) x[j] = Vector{} + 0.1f * (j + 1);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j) x[j] = x[j] * m + a;
  }
  Vector s = x[0];
  for (int j = 1; j < kAccumulators; ++j) s += x[j];
  float sum = 0;
  for (size_t l = 0; l < sizeof(Vector) / sizeof(float); ++l) sum += s[l];
  return sum;
}

typedef float Float16 __attribute__((vector_size(64)));
typedef float Float8 __attribute__((vector_size(32)));

__attribute__((target("avx512f"))) float FmaLoopAvx512(int64_t iterations) {
  return FmaChains<Float16>(iterations);
}

__attribute__((target("avx2,fma"))) float FmaLoopAvx2(int64_t iterations) {
  return FmaChains<Float8>(iterations);
}

// Without FMA: the same dependency pattern as scalar multiply-adds.
float FmaLoopScalar(int64_t iterations) {
  float x[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) x[j] = 0.1f * (j + 1);
  for (int64_t i = 0; i < iterations; ++i) {
    for (float& v : x) v = v * 0.999999f + 1e-6f;
  }
  float sum = 0;
  for (float v : x) sum += v;
  return sum;
}

struct FmaLoop {
  const char* isa;
  float (*run)(int64_t);
  int lanes;
};

FmaLoop WidestFmaLoop() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", FmaLoopAvx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"avx2+fma", FmaLoopAvx2, 8};
  }
  return {"scalar", FmaLoopScalar, 1};
}

// Keeps the loops' results alive so no compiler drops them.
volatile float g_sink = 0;

// GFLOPS of `loop` on `threads` threads, each running `iterations`.
double TimeFma(const FmaLoop& loop, int threads, int64_t iterations) {
  std::vector<float> results(threads);
  const double s = RunOnThreads(threads, [&](int t) { results[t] = loop.run(iterations); });
  for (float r : results) g_sink = g_sink + r;
  const double flops = 2.0 * kAccumulators * loop.lanes * iterations * threads;
  return s > 0 ? flops / s / 1e9 : 0;
}

// An anonymous mapping asked for transparent huge pages and filled: with 4 KiB
// pages a VM's triad measured a quarter of STREAM's figure (TLB misses).
class PopulatedArray {
 public:
  explicit PopulatedArray(int64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<float*>(p);
    if (data_ != nullptr) {
      madvise(p, bytes, MADV_HUGEPAGE);
      std::fill(data_, data_ + bytes / sizeof(float), 1.0f);
    }
  }
  ~PopulatedArray() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  PopulatedArray(const PopulatedArray&) = delete;
  PopulatedArray& operator=(const PopulatedArray&) = delete;
  float* data() const { return data_; }

 private:
  int64_t bytes_;
  float* data_ = nullptr;
};

// Out of line with restrict pointers so the loop vectorises as STREAM's does.
__attribute__((noinline)) void Triad(float* __restrict a, const float* __restrict b,
                                     const float* __restrict c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
}

// GB/s of the triad over [0, n) split across `threads`.
double TimeTriad(float* a, const float* b, const float* c, int64_t n, int threads) {
  const double s =
      RunOnThreads(threads, [&](int t) { Triad(a, b, c, n * t / threads, n * (t + 1) / threads); });
  return s > 0 ? 3.0 * sizeof(float) * n / s / 1e9 : 0;
}


// Three arrays of this many bytes each: past the last-level cache (when the
// OS says how large it is), at least 32 MiB and at most 128 MiB so the
// first touch stays cheap; a VM reporting a huge shared L3 gets 64 MiB.
int64_t TriadArrayBytes() {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::clamp<int64_t>(llc > 0 ? llc : 0, int64_t{32} << 20, int64_t{64} << 20);
}

}  // namespace

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

double HostPeaks::FmaGflops(int threads) const {
  return std::min(fma_gflops_one_thread * std::max(1, threads),
                  std::max(fma_gflops_all_threads, fma_gflops_one_thread));
}

double HostPeaks::StreamGbps(int threads) const {
  return std::min(stream_gbps_one_thread * std::max(1, threads),
                  std::max(stream_gbps_all_threads, stream_gbps_one_thread));
}

HostPeaks MeasureHostPeaks() {
  const Clock::time_point start = Clock::now();
  HostPeaks p;
  p.cpu_name = CpuModelName();
  p.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const FmaLoop loop = WidestFmaLoop();
  p.isa = loop.isa;
  // Enough iterations for about 2 ms on one thread (clock ramp-up included).
  int64_t iterations = 1 << 14;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    g_sink = g_sink + loop.run(iterations);
    if (SecondsSince(t0) > 2e-3 || iterations > (int64_t{1} << 32)) break;
    iterations *= 2;
  }
  // Best of five: on a shared machine any one run may lose its core for a while.
  for (int r = 0; r < 5; ++r) {
    p.fma_gflops_one_thread = std::max(p.fma_gflops_one_thread, TimeFma(loop, 1, iterations));
    if (p.cores > 1) {
      p.fma_gflops_all_threads =
          std::max(p.fma_gflops_all_threads, TimeFma(loop, p.cores, iterations));
    }
  }
  if (p.cores == 1) p.fma_gflops_all_threads = p.fma_gflops_one_thread;

  p.stream_array_bytes = TriadArrayBytes();
  const int64_t n = p.stream_array_bytes / static_cast<int64_t>(sizeof(float));
  const PopulatedArray a(p.stream_array_bytes), b(p.stream_array_bytes), c(p.stream_array_bytes);
  if (a.data() != nullptr && b.data() != nullptr && c.data() != nullptr) {
    for (int r = 0; r < 3; ++r) {
      p.stream_gbps_one_thread =
          std::max(p.stream_gbps_one_thread, TimeTriad(a.data(), b.data(), c.data(), n, 1));
      p.stream_gbps_all_threads =
          std::max(p.stream_gbps_all_threads, TimeTriad(a.data(), b.data(), c.data(), n, p.cores));
    }
    g_sink = g_sink + a.data()[n / 2];
  }
  p.measure_ms = SecondsSince(start) * 1e3;
  return p;
}

const HostPeaks& CachedHostPeaks() {
  static const HostPeaks* peaks = new HostPeaks(MeasureHostPeaks());
  return *peaks;
}

}  // namespace kiln::runtime
