#include "compiler/lower/qmatmul_call.h"

#include <vector>

#include "common/kernel_abi.h"
#include "compiler/ir/op_def.h"

namespace kiln::lower {

std::optional<Stmt> QMatMulCall(GroupContext& g, int out_buffer) {
  if (g.members.size() != 1) return std::nullopt;
  const Node* q = g.members[0];
  if (!q->is_op() || q->op->name != "qmatmul_u8s8") return std::nullopt;
  te::ExprBuilder& b = g.b;
  std::vector<CallArg> args{{out_buffer, b.Int(0)}};
  // 3: int32 output; 5: float32; 6: requantised uint8.
  const int operands = static_cast<int>(q->inputs.size());
  for (int i = 0; i < operands; ++i) {
    auto it = g.param_index.find(q->inputs[i]);
    if (it == g.param_index.end()) return std::nullopt;
    args.push_back({it->second, b.Int(0)});
  }
  const std::vector<int64_t>& x = q->inputs[0]->type.shape;
  const int64_t depth = x.back();
  const int64_t rows = depth == 0 ? 0 : q->inputs[0]->type.NumElements() / depth;
  for (int64_t v : {rows, depth, q->type.shape.back()}) args.push_back({-1, b.Int(v)});
  const char* callee = operands == 3   ? abi::kQMatMulU8S8I32
                       : operands == 6 ? abi::kQMatMulU8S8Q8
                                       : abi::kQMatMulU8S8;
  return MakeCall(callee, std::move(args));
}

}  // namespace kiln::lower
