#include "runtime/time_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/duration_stats.h"

namespace kiln::runtime {
namespace {

double TimeRuns(const std::function<void()>& run, int number) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < number; ++i) run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TimeEvaluation EvaluateTime(const std::function<void()>& run, TimeEvaluatorOptions options) {
  TimeEvaluation out;
  auto stop = [&] { return options.stop && options.stop(); };
  int number = std::max(1, options.number);
  const int repeat = std::max(1, options.repeat);
  for (int i = 0; i < std::max(0, options.warmup); ++i) run();
  if (options.min_repeat_ms > 0) {
    // Grow `number` until one measurement is long enough (bounded growth).
    for (int tries = 0; tries < 30; ++tries) {
      if (stop()) {
        out.stopped = true;
        return out;
      }
      if (options.before_each) options.before_each();
      const double ms = TimeRuns(run, number) * 1e3;
      if (ms >= options.min_repeat_ms) break;
      const double scale = ms > 0 ? options.min_repeat_ms / ms : 2.0;
      number = static_cast<int>(std::min<double>(
          1e9, std::max<double>(number * 2.0, std::ceil(number * scale * 1.1))));
    }
  }
  out.number = number;
  for (int r = 0; r < repeat; ++r) {
    if (stop()) {
      out.stopped = true;
      break;
    }
    if (options.before_each) options.before_each();
    out.results_s.push_back(TimeRuns(run, number) / number);
  }
  if (out.results_s.empty()) return out;
  std::vector<double> sorted = out.results_s;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : sorted) sum += v;
  out.mean_s = sum / sorted.size();
  out.min_s = sorted.front();
  out.max_s = sorted.back();
  const size_t n = sorted.size();
  out.median_s = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  double var = 0;
  for (double v : sorted) var += (v - out.mean_s) * (v - out.mean_s);
  out.std_s = std::sqrt(var / n);
  out.p90_s = Percentile(sorted, 0.9);
  out.p99_s = Percentile(sorted, 0.99);
  return out;
}

}  // namespace kiln::runtime
