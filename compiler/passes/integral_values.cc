#include "compiler/passes/integral_values.h"

#include <cmath>
#include <string>

#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"

namespace kiln {

bool IsIntegerValue(double v) { return std::isnan(v) || std::isinf(v) || std::nearbyint(v) == v; }

// The ops kept are closed under integrality: float sums, differences and
// products of integers round to integers (every float beyond 2^24 is one),
// and min, max and clip with integer bounds choose among integers.
bool IsIntegral(const Node* n, int depth) {
  if (depth == 0) return false;
  if (n->is_constant()) {
    if (!IsFloatDType(n->type.dtype)) return true;
    for (int64_t i = 0; i < n->type.NumElements(); ++i) {
      if (!IsIntegerValue(ReadElementAsDouble(n->type.dtype, n->value->bytes.data(), i))) {
        return false;
      }
    }
    return true;
  }
  if (!n->is_op()) return false;
  const std::string& op = n->op->name;
  if (op == "round" || op == "floor" || op == "ceil") return true;
  if (op == "cast") {
    const DType from = n->inputs[0]->type.dtype;
    return !IsFloatDType(from) || IsIntegral(n->inputs[0], depth - 1);
  }
  if (op == "clip") {
    const ActivationAttrs& a = std::get<ActivationAttrs>(n->attrs);
    return IsIntegerValue(a.alpha) && IsIntegerValue(a.beta) && IsIntegral(n->inputs[0], depth - 1);
  }
  if (op == "relu" || op == "neg" || op == "abs") return IsIntegral(n->inputs[0], depth - 1);
  if (op == "add" || op == "sub" || op == "mul" || op == "minimum" || op == "maximum") {
    return IsIntegral(n->inputs[0], depth - 1) && IsIntegral(n->inputs[1], depth - 1);
  }
  return false;
}

}  // namespace kiln
