// Records every pass — run or skipped — with wall time, nesting depth and
// whether it changed the graph; the compile report is built from these.
#ifndef KILN_COMPILER_TIMING_INSTRUMENT_H_
#define KILN_COMPILER_TIMING_INSTRUMENT_H_

#include <chrono>
#include <vector>

#include "compiler/pass.h"
#include "compiler/pass_report.h"

namespace kiln {

class TimingInstrument final : public PassInstrument {
 public:
  void RunBeforePass(const Graph& graph, const PassInfo& info, int depth) override;
  void RunAfterPass(const Graph& graph, const PassInfo& info, int depth, bool changed) override;
  void OnSkippedPass(const PassInfo& info, int depth, const std::string& reason) override;
  // In the order passes started (a Sequential before its children).
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<PassRecord> records_;
  // Open passes: index into records_ and start time (nested Sequentials stack).
  std::vector<std::pair<size_t, std::chrono::steady_clock::time_point>> open_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_TIMING_INSTRUMENT_H_
