#include "compiler/lower/qconv_call.h"

#include <vector>

#include "common/kernel_abi.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"

namespace kiln::lower {

std::optional<Stmt> QConvCall(GroupContext& g, int out_buffer) {
  if (g.members.size() != 1) return std::nullopt;
  const Node* q = g.members[0];
  if (!q->is_op() || q->op->name != "qconv2d_u8s8") return std::nullopt;
  const Node* zero = q->inputs[5];
  if (!zero->is_constant()) return std::nullopt;
  te::ExprBuilder& b = g.b;
  std::vector<CallArg> args{{out_buffer, b.Int(0)}};
  const bool requant = q->inputs.size() == 7;  // kiln_qconv_u8s8_q8's operand after bias
  for (int i : {0, 1, 2, 3, 4, 6}) {
    if (i == 6 && !requant) break;
    auto it = g.param_index.find(q->inputs[i]);
    if (it == g.param_index.end()) return std::nullopt;
    args.push_back({it->second, b.Int(0)});
  }
  const Pool2DAttrs& a = std::get<Pool2DAttrs>(q->attrs);
  const std::vector<int64_t>& x = q->inputs[0]->type.shape;
  const std::vector<int64_t>& out = q->type.shape;
  const int64_t x_zero =
      static_cast<int64_t>(ReadElementAsDouble(zero->type.dtype, zero->value->bytes.data(), 0));
  for (int64_t v :
       {x[0], x[1], x[2], x[3], out[1], a.kernel[0], a.kernel[1], a.strides[0], a.strides[1],
        a.padding[0], a.padding[1], a.dilation[0], a.dilation[1], out[2], out[3], x_zero}) {
    args.push_back({-1, b.Int(v)});
  }
  return MakeCall(requant ? abi::kQConvU8S8Q8 : abi::kQConvU8S8, std::move(args));
}

}  // namespace kiln::lower
