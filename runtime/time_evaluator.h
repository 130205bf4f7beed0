// TVM's time_evaluator: `repeat` measurements of `number` runs each, number
// raised until one measurement lasts min_repeat_ms; results per run.
#ifndef KILN_RUNTIME_TIME_EVALUATOR_H_
#define KILN_RUNTIME_TIME_EVALUATOR_H_

#include <functional>
#include <vector>

namespace kiln::runtime {

struct TimeEvaluatorOptions {
  int number = 1;
  int repeat = 3;
  double min_repeat_ms = 0;
  int warmup = 1;
  // Asked between measurements: true ends the evaluation early (a caller
  // gone or past its deadline).
  std::function<bool()> stop;
  // Run untimed before each measurement (TVM's f_preproc), e.g. a cache
  // flush so each run starts cold; pair it with number = 1.
  std::function<void()> before_each;
};

struct TimeEvaluation {
  std::vector<double> results_s;  // seconds per run, one per repeat
  double mean_s = 0, median_s = 0, min_s = 0, max_s = 0, std_s = 0, p90_s = 0, p99_s = 0;
  int number = 1;  // runs per measurement actually used
  bool stopped = false;  // options.stop ended it; results_s holds what ran
};

TimeEvaluation EvaluateTime(const std::function<void()>& run, TimeEvaluatorOptions options);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_TIME_EVALUATOR_H_
