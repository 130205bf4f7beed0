// What a compile did and cost: one record per pass (run or skipped), in order,
// and the IR dumps that were asked for. Filled by the pass instruments.
#ifndef KILN_COMPILER_PASS_PASS_REPORT_H_
#define KILN_COMPILER_PASS_PASS_REPORT_H_

#include <string>
#include <vector>

namespace kiln {

struct PassRecord {
  std::string name;
  int depth = 0;  // nesting: a Sequential's passes are one deeper than it
  double ms = 0;       // total wall time, nested passes included
  double self_ms = 0;  // ms minus the passes nested in it (equal to ms for a leaf)
  bool changed = false;
  bool skipped = false;
  std::string skip_reason;  // "opt_level 3 > 2", "disabled"
};

struct IrDumpRecord {
  std::string after_pass;
  std::string text;
};

struct CompileRecord {
  std::vector<PassRecord> passes;
  std::vector<IrDumpRecord> ir_dumps;
  double passes_ms = 0;  // wall time of the whole pipeline
  double lower_ms = 0;   // partitioning and lowering to loop nests
};

}  // namespace kiln

#endif  // KILN_COMPILER_PASS_PASS_REPORT_H_
