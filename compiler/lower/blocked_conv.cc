// conv2d_nchwc under the contraction schedule.
//
// Design note
// -----------
// In NCHW{c}c (c = 16, one 512-bit vector) the GEMM the schedule reads off
// the blocked conv is
//     M = pixels (n, oh, ow)   N = output channels (ob, oi)   K = (cb, kh, kw, ci)
//     A = input[n][cb][oh*s + kh][ow*s + kw][ci]   (steps by one along ci)
//     B = weight[ob][cb][kh][kw][ci][oi]           (a constant: packed once)
// so every tile row is one pixel whose K run is read in place, one
// broadcast per input channel from the pixel's channel line, and every
// vector of a tile is one output block of one pixel: a whole 64-byte line,
// stored contiguously (ContractionTarget::channel_blocks tells the schedule
// N is (ob, oi), though ob is not next to oi in the output). NCHW convs
// need the padded-rows trick (conv_padding.cc) to read their input in
// place; here each tile row addresses its own pixel, so padding only has to
// make the window's reads plain loads: the input is copied once into a
// zero-padded blocked buffer (N, C/c, H + pt + pb, W + pl + pr, c) and the
// conv reads it with no select, at any stride. The copy moves whole
// channel lines (vectorised over ci). K blocks, parts and prefetches follow
// the channel lanes' rules (ContractionPlan::pixel_rows).
//
// The 6x64 micro-kernel of resnet18's layer1 3x3 conv (objdump of
// kiln-bench --dump-objects) is what MLAS runs: per input channel 6
// broadcasts (one per pixel, each from that pixel's line), 4 weight loads,
// 24 FMAs; its stores are 24 whole lines. Measured on an Intel Xeon
// (AVX-512), resnet18 b1, 1 thread, per-kernel medians, NCHW (channel
// lanes, padded rows) -> blocked:
//     stem 7x7/2, 3 -> 64 ch       1.89       -> 1.37-1.46 ms
//     layer1 3x3, 64 ch, 56x56     1.47-1.76  -> 1.26-1.38
//     layer2 3x3/2, 64 -> 128      0.89       -> 0.68-0.75
//     layer2 3x3, 128 ch           1.28-1.49  -> 1.15-1.30
//     layer3 3x3, 256 ch           1.30-1.43  -> 1.25-1.32
//     layer4 3x3, 512 ch           1.50-1.85  -> 1.73-1.88 (weights stream from memory)
// What is left against MLAS's ~89% of the FMA peak (the layer1 conv runs at
// 70-77%): the padded copy, a pass over the input that MLAS avoids by
// clipping the window at the borders, and the loop overhead around a
// 48-step reduction per window row (3 x 16 channels).
// On an AMD EPYC (Zen 5, AVX-512, 1 thread) the 3x3 convs run at 88-95% of
// the FMA peak; skipping the copy altogether (wrong values, an upper bound)
// took 2-7% off them (layer1 0.925 -> 0.885 ms) and 16% off the stem, whose
// copy also converts NCHW to blocks of 3 channels. That one now vectorises
// along the row (below): stem 1.06-1.09 -> 0.93-0.96 ms.
#include "compiler/lower/blocked_conv.h"

#include <variant>

#include "compiler/ir/op_def.h"
#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/loop_partition.h"

namespace kiln::lower {

using te::Expr;
using te::Var;

const Node* LoneAnchor(const GroupContext& g, const std::string& op) {
  const Node* conv = nullptr;
  for (const Node* m : g.members) {
    if (m->op->name == op) {
      if (conv != nullptr) return nullptr;
      conv = m;
    } else if (m->op->pattern >= OpPattern::kCommReduce) {
      return nullptr;
    }
  }
  if (conv == nullptr || !std::holds_alternative<Conv2DAttrs>(conv->attrs)) return nullptr;
  if (conv->type.shape != g.members.back()->type.shape) return nullptr;
  return conv;
}

const Node* BlockedConv(const GroupContext& g) { return LoneAnchor(g, "conv2d_nchwc"); }

Stmt ZeroPaddedCopy(GroupContext& g, const Node* input, int buffer,
                    const std::vector<int64_t>& shape, int64_t top, int64_t left) {
  te::ExprBuilder& b = g.b;
  const std::vector<int64_t>& xs = input->type.shape;
  std::vector<Var> fill_vars;
  std::vector<Expr> fill_idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    fill_vars.push_back(b.NewVar("p" + std::to_string(d), shape[d]));
    fill_idx.push_back(b.Ref(fill_vars.back()));
  }
  Expr y = b.Sub(fill_idx[2], b.Int(top));
  Expr x = b.Sub(fill_idx[3], b.Int(left));
  Expr inside = b.Binary(te::BinaryOp::kAnd, b.InRange(y, xs[2]), b.InRange(x, xs[3]));
  Expr read = g.ValueOf(input, {fill_idx[0], fill_idx[1], b.ClampIndex(y, xs[2]),
                                b.ClampIndex(x, xs[3]), fill_idx[4]});
  Stmt fill = MakeStore(buffer, g.FlatIndex(shape, fill_idx),
                        g.Flatten(b.Select(inside, read, b.Float(0))));
  // The loops: the outermost parallel, the innermost vectorised along a
  // pixel's channel block (one line per pixel), except where the block is
  // narrower than a vector (a stem's 3 channels, copied from NCHW by a fused
  // layout_transform): those vectorise along the row with the channels
  // unrolled inside, so each vector reads one channel's contiguous run and
  // LLVM interleaves the channels into whole-vector stores; the row splits
  // into its padding and an interior without clamps (PartitionBoundaryLoops:
  // scheduled kernels skip the loop pipeline's). Vectorised along its 3
  // channels, resnet18's stem copy took 16% of the stem's time.
  std::vector<Var> loops;
  for (const Var& v : fill_vars) {
    if (v->extent != 1) loops.push_back(v);
  }
  const bool narrow = xs[4] < kLanes && loops.size() >= 2 && loops.back() == fill_vars[4] &&
                      loops[loops.size() - 2] == fill_vars[3];
  size_t outer = loops.size();  // the loops around the innermost ones
  if (narrow) {
    fill = MakeFor(fill_vars[4], ForKind::kUnrolled, fill);
    fill = PartitionBoundaryLoops(MakeFor(fill_vars[3], ForKind::kVectorized, fill), b);
    outer -= 2;
  } else if (!loops.empty()) {
    fill = MakeFor(loops.back(), ForKind::kVectorized, fill);
    outer -= 1;
  }
  const int64_t elements = shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
  for (size_t d = outer; d-- > 0;) {
    const bool parallel = d == 0 && elements >= kParallelWorkThreshold;
    fill = MakeFor(loops[d], parallel ? ForKind::kParallel : ForKind::kSerial, fill);
  }
  return fill;
}

Stmt PadBlockedConvInput(GroupContext& g, const Node* conv, LoopFunction& fn,
                         std::vector<Var>& out_vars, Expr& value) {
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
  // Without padding the input is read in place, unless a fused prologue
  // (fuse_prologue.cc) must be applied to it: the copy applies it once per
  // element, where the in-place read would per load (per window position).
  if (!a.padding[0] && !a.padding[1] && !a.padding[2] && !a.padding[3] &&
      !g.member_set.count(conv->inputs[0])) {
    return nullptr;
  }
  te::ExprBuilder& b = g.b;
  const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
  const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
  const std::vector<int64_t>& os = conv->type.shape;
  const int64_t hp = xs[2] + a.padding[0] + a.padding[2];
  const int64_t wp = xs[3] + a.padding[1] + a.padding[3];
  const std::vector<int64_t> shape{xs[0], xs[1], hp, wp, xs[4]};
  const int padded = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"padded_input", te::ScalarType::kF32, xs[0] * xs[1] * hp * wp * xs[4]});
  g.shapes.push_back(shape);

  Stmt fill = ZeroPaddedCopy(g, conv->inputs[0], padded, shape, a.padding[0], a.padding[1]);

  // The conv over the padded input, at fresh output variables (the inliner's
  // memo already holds the group's element at the old ones).
  std::vector<Var> vars;
  std::vector<Expr> idx;
  for (size_t d = 0; d < os.size(); ++d) {
    vars.push_back(b.NewVar("i" + std::to_string(d), os[d]));
    idx.push_back(b.Ref(vars.back()));
  }
  Var cb = b.NewVar("rc", ws[1]), ky = b.NewVar("ry", ws[2]), kx = b.NewVar("rx", ws[3]);
  Var ci = b.NewVar("ri", ws[4]);
  Expr py = b.Add(b.Mul(idx[2], b.Int(a.strides[0])), b.Mul(b.Ref(ky), b.Int(a.dilation[0])));
  Expr px = b.Add(b.Mul(idx[3], b.Int(a.strides[1])), b.Mul(b.Ref(kx), b.Int(a.dilation[1])));
  // With groups, the output's block reads the input's block of its index alone.
  Expr block = a.groups != 1 ? idx[1] : b.Ref(cb);
  Expr data = b.Load(padded, te::ScalarType::kF32, {idx[0], block, py, px, b.Ref(ci)});
  Expr weight =
      g.ValueOf(conv->inputs[1], {idx[1], b.Ref(cb), b.Ref(ky), b.Ref(kx), b.Ref(ci), idx[4]});
  Expr sum = b.Reduce(te::ReduceOp::kSum, {cb, ky, kx, ci}, b.Mul(data, weight));
  if (conv->inputs.size() == 3) sum = b.Add(sum, g.ValueOf(conv->inputs[2], {idx[1], idx[4]}));
  std::vector<const te::ExprNode*> key;
  for (const Expr& e : idx) key.push_back(e.get());
  g.memo[{conv, key}] = sum;
  value = g.ValueOf(g.members.back(), idx);
  out_vars = vars;
  return fill;
}

}  // namespace kiln::lower
