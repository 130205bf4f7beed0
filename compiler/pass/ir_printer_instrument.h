// Prints the IR after chosen passes (or all) into IrDumpRecords: the graph
// after graph passes, the kernels' loop nests after loop passes.
#ifndef KILN_COMPILER_PASS_IR_PRINTER_INSTRUMENT_H_
#define KILN_COMPILER_PASS_IR_PRINTER_INSTRUMENT_H_

#include <string>
#include <vector>

#include "compiler/pass/pass.h"
#include "compiler/pass/pass_report.h"

namespace kiln {

class IrPrinterInstrument final : public PassInstrument {
 public:
  // `after`: pass names, or "all".
  explicit IrPrinterInstrument(std::vector<std::string> after) : after_(std::move(after)) {}
  void RunAfterPass(const PassInfo& info, int depth, bool changed, PrintIr print_ir) override;
  const std::vector<IrDumpRecord>& dumps() const { return dumps_; }

 private:
  std::vector<std::string> after_;
  std::vector<IrDumpRecord> dumps_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_PASS_IR_PRINTER_INSTRUMENT_H_
