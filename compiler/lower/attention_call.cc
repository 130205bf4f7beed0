#include "compiler/lower/attention_call.h"

#include <vector>

#include "common/kernel_abi.h"
#include "compiler/ir/op_def.h"

namespace kiln::lower {

std::optional<Stmt> AttentionCall(GroupContext& g, int out_buffer) {
  if (g.members.size() != 1) return std::nullopt;
  const Node* op = g.members[0];
  if (!op->is_op() || op->op->name != "attention") return std::nullopt;
  te::ExprBuilder& b = g.b;
  const AttentionAttrs& a = std::get<AttentionAttrs>(op->attrs);
  std::vector<CallArg> args{{out_buffer, b.Int(0)}};
  const std::vector<const AttentionView*> views{&a.q, &a.k, &a.v, &a.mask};
  // The mask's pointer is q's when there is none: never read, but valid.
  for (size_t i = 0; i < 4; ++i) {
    const Node* in = op->inputs[i < op->inputs.size() ? i : 0];
    auto it = g.param_index.find(in);
    if (it == g.param_index.end()) return std::nullopt;
    args.push_back({it->second, b.Int(i < op->inputs.size() ? views[i]->offset : 0)});
  }
  for (int64_t v : {a.n1, a.n2, a.s, a.t, a.d, a.dv}) args.push_back({-1, b.Int(v)});
  for (const AttentionView* v : {&a.q, &a.k, &a.v, &a.mask, &a.out}) {
    for (int64_t x : {v->s1, v->s2, v->row}) args.push_back({-1, b.Int(x)});
  }
  args.push_back({-1, b.Int(op->inputs.size() == 4 ? 1 : 0)});
  args.push_back({-1, b.Float(a.scale)});
  return MakeCall(abi::kAttentionF32, std::move(args));
}

}  // namespace kiln::lower
