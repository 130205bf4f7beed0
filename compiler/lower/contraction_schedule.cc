// Contraction schedule: packed operands and a register-tiled micro-kernel.
// This file reads the contraction off the expression (the analysis below)
// and ties the steps together: contraction_plan.cc chooses, from the
// numbers the analysis found, everything the note below calls a choice
// (tile, layout, K blocks, cache groups, parts), and contraction_emit.cc
// builds the loops the plan says.
//
// Design note
// -----------
// Every op Kiln lowers to a sum of products -- dense, matmul, batched matmul,
// conv2d (any groups, strides, padding) -- reaches lowering as one expression
//     out[o] = epilogue( sum_k fa(o, k) * fb(o, k) )
// after the group's producers are inlined. The schedule reads the GEMM off that
// expression instead of off op names, so fused producers (a transpose feeding
// a matmul, conv padding) and fused consumers (bias, relu, residual add) come
// along for free:
//   - N: the trailing output dimensions only fb depends on. The innermost one
//     must be among them, so a column of the tile is contiguous in the output.
//   - M: the output dimensions only fa depends on.
//   - batch: the rest (attention heads, conv's image index at batch > 1).
//   - K: the reduction variables, flattened.
// conv2d is then an implicit GEMM: M = output channels, N = output pixels,
// K = in-channels x kernel window; fb is the im2col element of the input.
//
// Both operands are packed into panels so the inner loop streams memory:
//     Ap[batch][M/MR][K][MR]        Bp[batch][N/NR][K][NR]
// padded with zeros to whole tiles. An operand that is a plain load of a
// constant (dense and conv weights) is packed once, here, at compile time;
// the kernel then reads the packed copy instead of the original. Otherwise
// (activations, im2col) the kernel packs it at the start of each call, which
// costs K*(M or N) copies against M*N*K multiply-adds -- except that an
// activation A whose rows run contiguously along K is read in place: its MR
// rows are broadcast one element at a time, so a row-major A streams as
// well as a panel would (transformer b8, 1 thread: the 1024x1024 FFN output
// matmuls went from 3.45 to 2.61 ms, the model from 46.7 to 40.2).
//
// The micro-kernel keeps an MR x NR tile of accumulators in vector registers
// (NR = 16 * NV lanes of a 512-bit register):
//     for batch, jb (parallel), ib:
//       acc[MR][NR] = 0
//       for k:   for r < MR (unrolled):   acc[r][:] += Ap[ib][k][r] * Bp[jb][k][:]
//       for r < MR (unrolled):  out[.., m, n:n+NR] = epilogue(acc[r][:])   (masked)
// Each k step does NV vector loads, MR broadcasts and MR*NV FMAs. (MR, NV)
// is chosen per shape: the estimated cycles over all tiles, where one k step
// costs max(FMAs / 2 ports, loads / 2 ports, 4 cycles of FMA latency), with
// the padding that a tile size wastes counted in. The epilogue runs while the
// tile is still in registers, and stores through a lane mask at the edges.
// Loop order jb -> ib keeps one K x NR panel of Bp in L1/L2 while the whole
// of Ap (weights, at most a few MB for the models Kiln targets) streams.
//
// Prefetch (contraction_emit.cc): a flat tile whose panel outgrows L1 reads
// NR floats of it from L2 per k step, 256 bytes at 6x64, which the hardware
// prefetcher did not keep up with; each k step asks for the row 16 steps
// ahead into L1. And the row tiles of one column block together prefetch
// the next block's panel into L2, a line every (steps / lines) k steps.
// Where the GEMM stands (Intel Xeon "Intel(R) Xeon(R) Processor": AVX-512
// and AMX, 48 KB L1d, 2 MB L2; 1 thread; the best of 3-5 interleaved
// kiln-bench runs on a host shared with three other jobs, 0.4.31 -> 0.4.32):
//     512^3           1.47 -> 1.36 ms    128x3072x768    3.46 -> 3.12 ms
//     1024^3         12.37 -> 12.13      128x768x3072    3.28 -> 3.27
//     2048^3    109 to 117 -> 96 to 100  128x768x768     0.72 -> 0.74
// (2048^3 now without K blocks: see KBlockSpan in contraction_plan.cc.)
// In a model the panels come from further away: bert_base at seq 128, 1
// thread, went from 155 to 127 ms at batch 1 (its 128x3072x768 GEMMs with
// bias and residual from 5.1 to 3.7 ms, 51% to 71% of the peak) and from
// 3.09 to 2.53 s at batch 8. gemm-bench in a quiet spell (medians of 11,
// Kiln / oneDNN): 2048^3 0.77 -> 0.96 at 1 thread; 1024^3 0.92 -> 0.94 (1
// thread), 0.92 -> 0.98 (2); 512^3 0.94 -> 0.96.
// 1024^3 at 12.1 ms is 177 GFLOPS, 74% of the FMA peak kiln-bench measured
// (240 GFLOPS); oneDNN's dnnl_sgemm reached 171-187 on the same host in
// quiet spells, so the large squares are about level with it at 1 thread,
// not measurably ahead. What still separates them: the panel comes from L2,
// and a 6x64 tile over a panel that fits L1 (K = 128) runs at 86-88% of the
// peak. K blocks with cache groups put a 32 KB block of it in L1 but ran at
// 77% even with every operand in L2, and 65% at 2048^3: their partial sums
// and A's per-call packing (a 6-wide gather per k) cost more than L1 saves.
//
// B is read in place, unpacked, when its index already steps by one element
// along N and the tile may overrun the end (see ContractionTarget::
// conv_input). Lowering sets this up for conv2d of any stride up to 4
// (conv_padding.cc): it copies the input once into a zero-padded buffer and
// computes the output over padded rows, so at stride 1 the im2col element
// for pixel n' = oh * Wp + ow and window offset (c, kh, kw) is
// padded[c][kh][kw + n'] -- contiguous in n' across rows; a strided conv's
// copy is split into stride phases, each of which reads the same way. The
// Wp - OW extra columns per row are masked at the store. That replaces a
// K x N im2col copy per call (as costly as the multiply-adds for 3x3 convs
// with 64 channels) by a copy of the input. A 1x1 conv without padding
// needs no copy: at stride 1 its input already is the padded buffer, only
// without slack, so it is read in place where tiles divide N exactly (and by
// channel lanes, which never overrun, at any stride), and packed otherwise
// (strided pixels never step by one). The copy had
// cost mobilenet_v2's pointwise convs a pass over their input, and at two
// threads a cross-core one (the copy split by channels, the tiles by pixels).
//
// Over padded rows the output is not contiguous along n', so a tile's store
// becomes a scatter through per-lane (oh, ow) digits. Where K is short that
// scatter dominates (ResNet's 7x7 stem, K = 147, ran 2.7x slower; depthwise
// convs, K = 9, 1.7x), so the schedule may instead tile each output row on
// its own ("row tiles": N = OW padded to whole tiles, the rows a loop around
// the tiles) and store contiguously. The cost estimate picks: flat rows
// waste no lanes, row tiles waste the last tile's lanes of every row.
//
// K blocks: when Ap is far larger than L2 and many column blocks would each
// stream it again, the reduction is split into blocks of KC rows, with the
// tile's partial sums kept in a buffer between blocks and the epilogue
// applied after the last (see KBlockSpan in contraction_plan.cc for when,
// and what it measured):
//     for batch, jb (parallel), kc:  for ib:  acc = kc ? partial : 0
//       for k in block kc: ...;  kc < last ? partial = acc : out = epilogue(acc)
// Blocked that way, each column block still streams all of Ap from L3, so
// column and row blocks are gathered into cache groups whose partial sums
// and K block of Ap fit L2 (see ChooseCacheGroups there):
//     for batch, jg (parallel), ig, kc:  for jb in jg:  for ib in ig:  ...
//
// Channel lanes: convs whose pixels fill tiles poorly (7x7 and 14x14 outputs,
// and padded rows in general) may swap the roles instead -- lanes over output
// channels, the weights as the packed lane operand, the input read in place
// one broadcast per pixel, the store along channels once per tile (codegen
// transposes the tile in registers; see contraction_plan.cc). Measured on
// resnet18 b1, 1 thread: the 512-channel 7x7 convs went from 1.72 to 1.43
// ms, the 14x14 ones from 1.55 to 1.25; at batch 8, where the images join
// the pixels, the model from 228 to 176 ms. Images with many pixels whose
// padded input outgrows L2 stay apart instead and run one at a time
// (ImagesApart in contraction_plan.cc), so lowering can pad each just
// before its tiles.
//
// Channel blocks: a conv2d_nchwc (blocked_conv.cc) gets the channel lanes'
// roles without their transposed store. Its output's block number, which
// only the weights index, joins the lanes' block in N (JoinChannelBlocks),
// so a 6x64 tile covers four blocks of 16 channels for six pixels: each
// pixel's channels are read in place, one broadcast per channel from one
// line, and each vector is stored as one whole line of the output.
#include "compiler/lower/contraction_schedule.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "compiler/lower/contraction_emit.h"
#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/linear_form.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;
using Layout = ContractionPlan::Layout;

void CollectReduces(const Expr& e, std::unordered_set<const te::ExprNode*>& seen,
                    std::vector<Expr>& out) {
  if (!seen.insert(e.get()).second) return;
  if (e->kind == ExprKind::kReduce) {
    out.push_back(e);
    return;
  }
  for (const Expr& o : e->operands) CollectReduces(o, seen, out);
}

// The outermost reductions of `e` (none inside another), each once.
std::vector<Expr> ReducesOf(const Expr& e) {
  std::unordered_set<const te::ExprNode*> seen;
  std::vector<Expr> found;
  CollectReduces(e, seen, found);
  return found;
}

// The contraction read off the target's expression: its operands as a GEMM
// (ContractionOperands), the numbers the plan is chosen from, and, once a
// plan is chosen, its layout applied to the operands.
class ContractionAnalysis {
 public:
  explicit ContractionAnalysis(const ContractionTarget& t) : t_(t), b_(*t.builder) {
    ops_.value = t.value;
    ops_.out_index = t.out_index;
    ops_.store_predicate = t.store_predicate;
  }

  const ContractionOperands& operands() const { return ops_; }

  // Whether the value is one float32 sum of products worth tiling; if so,
  // splits the output variables into M, N and batch and the reduction's
  // into K.
  bool Analyse(const ContractionKnobs& knobs) {
    std::vector<Expr> reduces = ReducesOf(ops_.value);
    if (reduces.size() != 1) return false;
    ops_.reduce = reduces[0];
    const Expr& reduce = ops_.reduce;
    if (reduce->reduce_op() != te::ReduceOp::kSum || reduce->type != te::ScalarType::kF32) {
      return false;
    }
    const Expr& body = reduce->operands[0];
    if (body->kind != ExprKind::kBinary || body->binary_op() != te::BinaryOp::kMul ||
        !ReducesOf(body).empty()) {
      return false;
    }
    std::vector<Var> outs;
    for (const Var& v : t_.out_vars) {
      if (v->extent != 1) outs.push_back(v);
    }
    if (outs.empty()) return false;
    for (const Var& v : outs) {
      if (!DependsOn(reduce, v.get())) return false;  // the epilogue broadcasts
    }
    Expr& fa = ops_.fa;
    Expr& fb = ops_.fb;
    fa = body->operands[0];
    fb = body->operands[1];
    const te::VarNode* x = outs.back().get();
    const bool in_a = DependsOn(fa, x), in_b = DependsOn(fb, x);
    if (in_a && in_b) return false;
    if (in_a) std::swap(fa, fb);
    size_t first_n = outs.size();
    while (first_n > 0 && DependsOn(fb, outs[first_n - 1].get()) &&
           !DependsOn(fa, outs[first_n - 1].get())) {
      --first_n;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const bool a = DependsOn(fa, outs[i].get()), bdep = DependsOn(fb, outs[i].get());
      if (i >= first_n) {
        ops_.n_vars.push_back(outs[i]);
      } else if (a && !bdep) {
        ops_.m_vars.push_back(outs[i]);
      } else {
        ops_.batch_vars.push_back(outs[i]);
      }
    }
    if (t_.channel_blocks) JoinChannelBlocks();
    for (const Var& v : reduce->reduce_vars) {
      if (v->extent != 1) ops_.k_vars.push_back(v);
    }
    const int64_t m = Product(ops_.m_vars), n = Product(ops_.n_vars), k = Product(ops_.k_vars);
    return k >= 8 && n >= kLanes && m * n * k * Product(ops_.batch_vars) >= knobs.min_work;
  }

  // The numbers and facts the plan is chosen from (after Analyse).
  ContractionShape Shape() {
    ContractionShape s;
    s.m = Product(ops_.m_vars);
    s.n = Product(ops_.n_vars);
    s.k = Product(ops_.k_vars);
    s.batch = Product(ops_.batch_vars);
    s.k_outer = ops_.k_vars[0]->extent;
    // Flat tiles scatter where the output is not contiguous along N (a conv
    // computed over padded rows).
    // (Channel blocks store each vector whole, one block of one pixel.)
    s.flat_store_scatters = !t_.channel_blocks && ops_.n_vars.size() > 1 &&
                            !StepsByOne(b_, ops_.out_index, ops_.n_vars, s.n);
    const Var& inner = ops_.n_vars.back();
    s.n_inner = inner->extent;
    s.row_tiles_apply = ReadsConvInput(ops_.fb) && t_.conv_input_has_slack &&
                        StrideAlong(ConvInputLoad(ops_.fb)->operands[0], inner.get()) == 1 &&
                        StrideAlong(ops_.out_index, inner.get()) == 1;
    // Channel lanes: the weights (a constant) become the lane operand and
    // the conv input is read in place.
    s.channel_lanes_apply = ReadsConvInput(ops_.fb) && ops_.fa->kind == ExprKind::kLoad &&
                            t_.constant_of(ops_.fa->buffer) != nullptr;
    if (s.channel_lanes_apply) {
      s.lanes_joined = LanesShape(/*images_apart=*/false);
      s.lanes_apart = LanesShape(/*images_apart=*/true);
    }
    s.channel_blocks = t_.channel_blocks && ops_.n_vars.size() == 2;
    s.conv_input_has_slack = t_.conv_input_has_slack;
    if (t_.conv_input >= 0) s.conv_input_bytes = (*t_.buffers)[t_.conv_input].num_elements * 4;
    if (!ops_.batch_vars.empty()) s.inner_batch = ops_.batch_vars.back()->extent;
    s.inner_batch_row_tiles =
        ops_.n_vars.size() > 1 ? ops_.n_vars[ops_.n_vars.size() - 2]->extent : s.inner_batch;
    return s;
  }

  // The operands rearranged for the plan's layout.
  void ApplyLayout(const ContractionPlan& plan) {
    if (plan.layout == Layout::kRowTiles) {
      // The outer N dimensions become loops around the tiles.
      std::vector<Var>& n_vars = ops_.n_vars;
      ops_.batch_vars.insert(ops_.batch_vars.end(), n_vars.begin(), n_vars.end() - 1);
      n_vars = {n_vars.back()};
    } else if (plan.layout == Layout::kChannelLanes) {
      UseChannelLanes(plan.images_apart);
    }
  }

  // What decides the operands' access under `plan` (after ApplyLayout).
  OperandFacts FactsFor(const ContractionPlan& plan) {
    OperandFacts f;
    const Expr& fa = ops_.fa;
    if (plan.layout != Layout::kChannelLanes && (plan.k_block_span == 0 || plan.pixel_rows) &&
        fa->kind == ExprKind::kLoad && t_.constant_of(fa->buffer) == nullptr) {
      const Var& k_inner = ops_.k_vars.back();
      f.a_broadcastable = StepsByOne(b_, fa->operands[0], {k_inner}, k_inner->extent);
    }
    const Expr& fb = ops_.fb;
    f.b_plain_activation_load =
        fb->kind == ExprKind::kLoad && t_.constant_of(fb->buffer) == nullptr;
    f.b_may_overrun = ReadsConvInput(fb) && t_.conv_input_has_slack;
    const bool exact = plan.nb * plan.tile.nr() == plan.n;
    if (f.b_plain_activation_load && (f.b_may_overrun || exact)) {
      f.b_steps_by_one = StepsByOne(b_, fb->operands[0], ops_.n_vars, plan.n + plan.tile.nr());
    }
    return f;
  }

 private:
  // Blocked output channels (ContractionTarget::channel_blocks): the block
  // number, a batch dimension only the weights index, joins the lanes' block
  // in N, so a tile spans up to four blocks and each broadcast of the input
  // feeds as many multiply-adds.
  void JoinChannelBlocks() {
    std::vector<Var>& n_vars = ops_.n_vars;
    std::vector<Var>& batch = ops_.batch_vars;
    if (n_vars.size() != 1 || n_vars[0]->extent != kLanes) return;
    for (size_t i = batch.size(); i-- > 0;) {
      if (DependsOn(ops_.fb, batch[i].get()) && !DependsOn(ops_.fa, batch[i].get())) {
        n_vars.insert(n_vars.begin(), batch[i]);
        batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }

  bool ReadsConvInput(const Expr& f) const { return ConvInputLoad(f) != nullptr; }

  // The load of the conv input `f` is: `f` itself, or, through a fused
  // prologue (fuse_prologue.cc), the one load of it in `f` when f's other
  // loads index by no N variable (per-channel values); else null.
  const te::ExprNode* ConvInputLoad(const Expr& f) const {
    if (t_.conv_input < 0) return nullptr;
    if (f->kind == ExprKind::kLoad) return f->buffer == t_.conv_input ? f.get() : nullptr;
    const te::ExprNode* input = nullptr;
    bool other_by_n = false;
    std::unordered_set<const te::ExprNode*> seen;
    std::vector<const te::ExprNode*> stack{f.get()};
    while (!stack.empty()) {
      const te::ExprNode* e = stack.back();
      stack.pop_back();
      if (!seen.insert(e).second) continue;
      if (e->kind == ExprKind::kLoad) {
        if (e->buffer == t_.conv_input) {
          if (input != nullptr) return nullptr;
          input = e;
          continue;
        }
        for (const Var& v : ops_.n_vars) other_by_n |= DependsOn(e->operands[0], v.get());
      }
      if (e->kind == ExprKind::kReduce) return nullptr;
      for (const Expr& o : e->operands) stack.push_back(o.get());
    }
    return other_by_n ? nullptr : input;
  }

  // Channel lanes' pixels and batch: the output channels go to the lanes,
  // the N dimensions and the images (unless kept apart) to the pixels. The
  // pixels exclude the padded rows' extra columns: the store predicate that
  // masks them is folded into a narrower domain.
  struct LanesVars {
    std::vector<Var> pixels, batch;
    Var wide;  // the padded-row variable the predicate bounds, or null
    int64_t narrow_extent = 0;
    bool applies = true;
  };
  LanesVars LanesVarsFor(bool images_apart) const {
    LanesVars l;
    const Expr& fa = ops_.fa;
    for (const Var& v : ops_.batch_vars) {
      (DependsOn(fa, v.get()) || images_apart ? l.batch : l.pixels).push_back(v);
    }
    l.pixels.insert(l.pixels.end(), ops_.n_vars.begin(), ops_.n_vars.end());
    if (const Expr& p = ops_.store_predicate) {
      if (p->kind != ExprKind::kCompare || p->compare_op() != te::CompareOp::kLT ||
          p->operands[0]->kind != ExprKind::kVar || p->operands[1]->kind != ExprKind::kIntImm) {
        l.applies = false;
        return l;
      }
      auto it = std::find_if(l.pixels.begin(), l.pixels.end(),
                             [&](const Var& v) { return v.get() == p->operands[0]->var.get(); });
      if (it == l.pixels.end()) {
        l.applies = false;
        return l;
      }
      l.wide = *it;
      l.narrow_extent = p->operands[1]->int_value;
    }
    return l;
  }

  ContractionShape::Lanes LanesShape(bool images_apart) const {
    const LanesVars l = LanesVarsFor(images_apart);
    ContractionShape::Lanes s;
    s.applies = l.applies;
    if (!l.applies) return s;
    s.pixels = Product(l.pixels);
    if (l.wide) s.pixels = s.pixels / l.wide->extent * l.narrow_extent;
    s.batch = Product(l.batch);
    return s;
  }

  // Lanes over output channels: fa becomes the input (broadcast per pixel),
  // fb the weights (lanes); the domain narrows to the output's columns.
  void UseChannelLanes(bool images_apart) {
    LanesVars l = LanesVarsFor(images_apart);
    if (l.wide) {
      Var narrow = b_.NewVar(l.wide->name, l.narrow_extent);
      std::replace(l.pixels.begin(), l.pixels.end(), l.wide, narrow);
      ops_.value = b_.Substitute(ops_.value, {l.wide}, {b_.Ref(narrow)});
      ops_.out_index = b_.Substitute(ops_.out_index, {l.wide}, {b_.Ref(narrow)});
      ops_.store_predicate = nullptr;
      ops_.reduce = ReducesOf(ops_.value)[0];
    }
    const Expr& body = ops_.reduce->operands[0];
    const bool weights_first = body->operands[0]->kind == ExprKind::kLoad &&
                               t_.constant_of(body->operands[0]->buffer) != nullptr;
    ops_.fa = body->operands[weights_first ? 1 : 0];
    ops_.fb = body->operands[weights_first ? 0 : 1];
    ops_.n_vars = ops_.m_vars;
    ops_.m_vars = l.pixels;
    ops_.batch_vars = l.batch;
  }

  const ContractionTarget& t_;
  te::ExprBuilder& b_;
  ContractionOperands ops_;
};

}  // namespace

std::optional<ContractionSchedule> ScheduleContraction(const ContractionTarget& target) {
  const ContractionKnobs knobs = target.knobs ? *target.knobs : HostContractionKnobs();
  ContractionAnalysis analysis(target);
  if (!analysis.Analyse(knobs)) return std::nullopt;
  const ContractionShape shape = analysis.Shape();
  std::string ignored;
  ContractionPlan plan = PlanContraction(shape, knobs, target.schedule_override, &ignored);
  analysis.ApplyLayout(plan);
  ChooseOperandAccess(analysis.FactsFor(plan), plan);
  ContractionSchedule schedule = EmitContraction(target, analysis.operands(), plan, knobs);
  schedule.shape = shape;
  const ScheduleOverride* o = target.schedule_override;
  if (o != nullptr && !o->empty()) {
    if (ignored.empty()) {
      schedule.override_applied = o->ToString();
    } else {
      schedule.override_ignored = ignored;
    }
  }
  return schedule;
}

}  // namespace kiln::lower
