// stream: the machine's sustainable memory bandwidth, STREAM-triad style.
//
//   stream [--threads T] [--mib M] [--repeats R] [--json]
//
// a[i] = b[i] + s * c[i] over three double arrays of M MiB each (default 256,
// far beyond any L3), best of R repeats, counted as STREAM counts it: 24 bytes
// per element (two reads, one write; the write-allocate read is not counted).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "client/cli_app.h"

namespace kiln::bench {
namespace {

struct FreeDeleter {
  void operator()(double* p) const { std::free(p); }
};
using Array = std::unique_ptr<double[], FreeDeleter>;

Array AllocateArray(int64_t n) {
  return Array(static_cast<double*>(std::aligned_alloc(64, n * sizeof(double))));
}

void Triad(double* __restrict a, const double* __restrict b, const double* __restrict c, double s,
           int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

// Runs `body(begin, end)` over [0, n) on `threads` threads (the caller is one).
template <typename F>
void Split(int threads, int64_t n, const F& body) {
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
  }
  body(0, n / threads);
  for (std::thread& w : workers) w.join();
}

int Main(int argc, char** argv) {
  std::unique_ptr<CLI::App> cli = client::NewCliApp(
      "stream", "stream: STREAM-triad memory bandwidth (a[i] = b[i] + s * c[i]).");
  client::AddValue(cli.get(), "threads", "T", "Threads (default 1)");
  client::AddValue(cli.get(), "mib", "M", "MiB per array, three arrays (default 256)");
  client::AddValue(cli.get(), "repeats", "R", "Triads timed, the best reported (default 10)");
  client::AddSwitch(cli.get(), "json", "Print the result as one JSON object");
  client::SetExample(cli.get(), "stream --threads 2 --mib 512 --json");
  client::CliArgs parsed;
  if (std::optional<int> done = client::ParseCommandLine(*cli, argc, argv, &parsed)) return *done;
  const client::CliArgs* args = &parsed;
  absl::StatusOr<int> threads = args->GetInt("threads", 1, 1);
  absl::StatusOr<int> mib = args->GetInt("mib", 256, 1);
  absl::StatusOr<int> repeats = args->GetInt("repeats", 10, 1);
  for (const absl::StatusOr<int>* v : {&threads, &mib, &repeats}) {
    if (!v->ok()) return client::PrintUsageError("stream", std::string(v->status().message()));
  }
  const int64_t n = int64_t{*mib} * 1024 * 1024 / sizeof(double);
  Array a = AllocateArray(n), b = AllocateArray(n), c = AllocateArray(n);
  if (!a || !b || !c) {
    std::cerr << "stream: cannot allocate 3 x " << *mib << " MiB\n";
    return 1;
  }
  // First touch on the threads that will use the pages.
  Split(*threads, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      a[i] = 0;
      b[i] = 1;
      c[i] = 2;
    }
  });
  double best_s = 1e30, sum_s = 0;
  for (int r = 0; r < *repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    Split(*threads, n,
          [&](int64_t begin, int64_t end) { Triad(a.get(), b.get(), c.get(), 3.0, begin, end); });
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best_s = std::min(best_s, s);
    sum_s += s;
  }
  // Keep the result observable.
  if (a[n / 2] != 7.0) std::cerr << "stream: unexpected a[n/2] = " << a[n / 2] << "\n";
  const double bytes = 3.0 * sizeof(double) * static_cast<double>(n);
  const double best_gbs = bytes / best_s / 1e9, avg_gbs = bytes / (sum_s / *repeats) / 1e9;
  if (args->Has("json")) {
    std::cout << absl::StrFormat(
        "{\"tool\": \"stream\", \"schema_version\": 1, "
        "\"kernel\": \"triad\", \"threads\": %d, \"array_mib\": %d, "
        "\"repeats\": %d, \"best_gb_per_s\": %.3f, \"avg_gb_per_s\": %.3f}\n",
        *threads, *mib, *repeats, best_gbs, avg_gbs);
  } else {
    std::cout << absl::StrFormat(
        "STREAM triad, %d thread(s), 3 x %d MiB doubles: best %.2f GB/s, average %.2f GB/s "
        "(24 bytes per element)\n",
        *threads, *mib, best_gbs, avg_gbs);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) { return kiln::bench::Main(argc, argv); }
