#include "compiler/ir/op_cost.h"

#include <vector>

#include "compiler/ir/op_def.h"

namespace kiln {

double OpFlops(const Node& node) {
  if (!node.is_op() || node.op == nullptr) return 0;
  std::vector<TensorType> inputs;
  inputs.reserve(node.inputs.size());
  for (const Node* in : node.inputs) inputs.push_back(in->type);
  if (node.op->flops) return node.op->flops(inputs, node.type, node.attrs);
  switch (node.op->pattern) {
    case OpPattern::kInjective:
    case OpPattern::kTuple:
      return 0;
    case OpPattern::kCommReduce:
      return inputs.empty() ? 0 : static_cast<double>(inputs[0].NumElements());
    default:
      return static_cast<double>(node.type.NumElements());
  }
}

}  // namespace kiln
