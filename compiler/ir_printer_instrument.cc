#include "compiler/ir_printer_instrument.h"

#include <algorithm>

#include "compiler/ir/printer.h"

namespace kiln {

void IrPrinterInstrument::RunAfterPass(const Graph& graph, const PassInfo& info, int, bool) {
  const bool wanted = std::find(after_.begin(), after_.end(), "all") != after_.end() ||
                      std::find(after_.begin(), after_.end(), info.name) != after_.end();
  if (wanted) dumps_.push_back({info.name, PrintGraph(graph)});
}

}  // namespace kiln
