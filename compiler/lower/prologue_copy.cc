// A 1x1 conv without padding reads its input in place (conv_padding.cc,
// IsPointwiseWithoutPadding). With a fused prologue f whose activation is a
// float32 parameter of the input's shape, the schedule reads that parameter
// in place and applies f on the way (lower_group.cc; contraction_emit.cc's
// TileProduct). Where there is none (f reads a narrow type, or reads
// through a layout_transform of another shape), f runs once per element in
// a flat, vectorised stage at the start of the kernel, into a buffer of the
// input's shape that the schedule then reads in place as it would the input.
// Measured on the SE convs of mobilenet_v3_large (Intel Xeon, b1, 1 thread,
// per-kernel medians of 6 alternating runs) this copy made them 12% slower
// than the scale's own kernel plus the conv (1.18 against 1.06 ms in all),
// where reading in place was 11% faster: hence only the fallback.
#include "compiler/lower/prologue_copy.h"

#include <string>

namespace kiln::lower {

using te::Expr;
using te::Var;

Stmt CopyPrologue(GroupContext& g, const Node* conv, LoopFunction& fn, ContractionTarget& target,
                  std::vector<Var>& out_vars, Expr& value) {
  te::ExprBuilder& b = g.b;
  const Node* input = conv->inputs[0];
  const std::vector<int64_t>& xs = input->type.shape;
  const int buffer = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"prologue", te::ScalarType::kF32, input->type.NumElements()});
  g.shapes.push_back(xs);

  std::vector<Var> vars;
  std::vector<Expr> idx;
  for (size_t d = 0; d < xs.size(); ++d) {
    vars.push_back(b.NewVar("p" + std::to_string(d), xs[d]));
    idx.push_back(b.Ref(vars.back()));
  }
  Stmt fill = MakeStore(buffer, g.FlatIndex(xs, idx), g.Flatten(g.ValueOf(input, idx)));
  std::vector<Var> loops;
  for (const Var& v : vars) {
    if (v->extent != 1) loops.push_back(v);
  }
  const int64_t elements = input->type.NumElements();
  for (size_t d = loops.size(); d-- > 0;) {
    ForKind kind = ForKind::kSerial;
    if (d + 1 == loops.size()) kind = ForKind::kVectorized;
    if (d == 0 && loops.size() > 1 && elements >= kParallelWorkThreshold) kind = ForKind::kParallel;
    fill = MakeFor(loops[d], kind, fill);
  }

  // The group's element again, at fresh output variables, with the input a
  // leaf read from the buffer (the memo holds the old element's inlining).
  g.member_set.erase(input);
  g.param_index[input] = buffer;
  std::vector<Var> fresh;
  std::vector<Expr> out_idx;
  for (const Var& v : out_vars) {
    fresh.push_back(b.NewVar(v->name, v->extent));
    out_idx.push_back(b.Ref(fresh.back()));
  }
  value = g.ValueOf(g.members.back(), out_idx);
  out_vars = fresh;
  target.conv_input = buffer;
  return fill;
}

}  // namespace kiln::lower
