// Concat written in place.
//
// googlenet ends each inception block with a concat of four branches along
// the channels; as a kernel it copies every branch once more (0.41 ms of
// 21 at batch 1). Where the slices are contiguous, the branches' kernels can
// store into the concat's buffer directly and the concat kernel goes away:
//
//   conv_a -> a ---\                 conv_a -> concat[0 : |a|)
//   conv_b -> b ----> concat   ==>   conv_b -> concat[|a| : |a|+|b|)
//   pool_c -> c ---/                 pool_c -> concat[... : ...)
//
// The program keeps a, b and c as values, each an alias of the concat's
// value at a byte offset (ValueSpec::alias_of); memory planning gives the
// concat one block live from its first slice's write to its last reader's
// (or a slice's last reader's), and the executor points each slice into it.
// A concat is made in place only where that is exact:
//   - it is a group of its own (not fused into a consumer), with every dim
//     before the axis of extent 1, so each input is one contiguous run of the
//     output (axis 1 of NCHW at batch 1; at batch > 1 a slice is strided and
//     the concat stays a kernel);
//   - every input is a distinct value written whole by its own kernel (a
//     group root): not a graph input or constant, not a graph output (those
//     are written into the caller's tensors), not an input of another
//     concat made in place, and not itself a concat made in place.
// Other readers of an input read its slice where it is: nothing writes the
// concat's block while it is live.
#include "compiler/lower/concat_in_place.h"

#include <set>
#include <variant>

#include "compiler/ir/op_def.h"

namespace kiln {

std::vector<InPlaceConcat> FindInPlaceConcats(
    const Graph& graph, const std::vector<const Node*>& roots,
    const std::map<const Node*, std::vector<const Node*>>& members) {
  std::set<const Node*> outputs(graph.outputs().begin(), graph.outputs().end());
  std::set<const Node*> taken;  // inputs of concats made in place, and those concats
  std::vector<InPlaceConcat> found;
  for (const Node* root : roots) {
    if (root->op->name != "concat" || members.at(root).size() != 1) continue;
    const int64_t rank = root->type.rank();
    int64_t axis = std::get<AxisAttrs>(root->attrs).axis;
    if (axis < 0) axis += rank;
    bool contiguous = true;
    for (int64_t d = 0; d < axis; ++d) contiguous &= root->type.shape[d] == 1;
    if (!contiguous) continue;
    InPlaceConcat c{root, {}, {}};
    std::set<const Node*> seen;
    int64_t offset = 0;
    bool ok = true;
    for (const Node* in : root->inputs) {
      const bool own_kernel =
          in->is_op() && (in->group_root == nullptr || in->group_root == in) && members.count(in);
      if (!own_kernel || outputs.count(in) || taken.count(in) || !seen.insert(in).second) {
        ok = false;
        break;
      }
      c.inputs.push_back(in);
      c.byte_offsets.push_back(offset);
      offset += in->type.ByteSize();
    }
    if (!ok) continue;
    taken.insert(root);
    taken.insert(c.inputs.begin(), c.inputs.end());
    found.push_back(std::move(c));
  }
  return found;
}

}  // namespace kiln
