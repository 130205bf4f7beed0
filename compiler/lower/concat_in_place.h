// Concats that need no kernel: each input's producer writes straight into
// its slice of the concat's buffer (design note in concat_in_place.cc).
#ifndef KILN_COMPILER_LOWER_CONCAT_IN_PLACE_H_
#define KILN_COMPILER_LOWER_CONCAT_IN_PLACE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "compiler/ir/graph.h"

namespace kiln {

// Its name for --disable-passes (a step of BuildProgram, not a graph pass).
inline constexpr char kConcatInPlaceName[] = "ConcatInPlace";

// A concat made in place: its inputs, in order, and the byte offset of each
// one's slice in the concat's buffer.
struct InPlaceConcat {
  const Node* concat = nullptr;
  std::vector<const Node*> inputs;
  std::vector<int64_t> byte_offsets;
};

// The group roots among `roots` (each with `members`) that are lone concats
// whose inputs can all be written in place, in root order.
std::vector<InPlaceConcat> FindInPlaceConcats(
    const Graph& graph, const std::vector<const Node*>& roots,
    const std::map<const Node*, std::vector<const Node*>>& members);

}  // namespace kiln

#endif  // KILN_COMPILER_LOWER_CONCAT_IN_PLACE_H_
