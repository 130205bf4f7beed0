// Records every pass — run or skipped — with wall time, nesting depth and
// whether it changed the graph; the compile report is built from these.
#ifndef KILN_COMPILER_PASS_TIMING_INSTRUMENT_H_
#define KILN_COMPILER_PASS_TIMING_INSTRUMENT_H_

#include <chrono>
#include <vector>

#include "compiler/pass/pass.h"
#include "compiler/pass/pass_report.h"

namespace kiln {

class TimingInstrument final : public PassInstrument {
 public:
  void RunBeforePass(const PassInfo& info, int depth) override;
  void RunAfterPass(const PassInfo& info, int depth, bool changed, PrintIr print_ir) override;
  void OnSkippedPass(const PassInfo& info, int depth, const std::string& reason) override;
  // In the order passes started (a Sequential before its children).
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<PassRecord> records_;
  struct Open {
    size_t index;  // into records_
    std::chrono::steady_clock::time_point start;
    double children_ms = 0;
  };
  // Passes still running, outermost first (a Sequential and the pass inside it).
  std::vector<Open> open_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_PASS_TIMING_INSTRUMENT_H_
