#include "compiler/pass/ir_printer_instrument.h"

#include <algorithm>

namespace kiln {

void IrPrinterInstrument::RunAfterPass(const PassInfo& info, int, bool, PrintIr print_ir) {
  const bool wanted = std::find(after_.begin(), after_.end(), "all") != after_.end() ||
                      std::find(after_.begin(), after_.end(), info.name) != after_.end();
  if (wanted) dumps_.push_back({info.name, print_ir()});
}

}  // namespace kiln
