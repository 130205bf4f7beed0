// The graph as readable, Relay-like text: one line per op node, in topological
// order, with types. What IR dumps and test failure messages show.
#ifndef KILN_COMPILER_IR_PRINTER_H_
#define KILN_COMPILER_IR_PRINTER_H_

#include <string>

#include "compiler/ir/graph.h"

namespace kiln {

std::string PrintGraph(const Graph& graph);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_PRINTER_H_
