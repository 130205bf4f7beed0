// Contraction schedule: packed operands and a register-tiled micro-kernel.
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
// applied after the last (see KBlockSpan for when, and what it measured):
//     for batch, jb (parallel), kc:  for ib:  acc = kc ? partial : 0
//       for k in block kc: ...;  kc < last ? partial = acc : out = epilogue(acc)
// Blocked that way, each column block still streams all of Ap from L3, so
// column and row blocks are gathered into cache groups whose partial sums
// and K block of Ap fit L2 (see ChooseCacheGroups):
//     for batch, jg (parallel), ig, kc:  for jb in jg:  for ib in ig:  ...
//
// Channel lanes: convs whose pixels fill tiles poorly (7x7 and 14x14 outputs,
// and padded rows in general) may swap the roles instead -- lanes over output
// channels, the weights as the packed lane operand, the input read in place
// one broadcast per pixel, the store along channels once per tile (codegen
// transposes the tile in registers; see PlanChannelLanes). Measured on
// resnet18 b1, 1 thread: the 512-channel 7x7 convs went from 1.72 to 1.43
// ms, the 14x14 ones from 1.55 to 1.25; at batch 8, where the images join
// the pixels, the model from 228 to 176 ms. Images with many pixels whose
// padded input outgrows L2 stay apart instead and run one at a time
// (ImagesApart), so lowering can pad each just before its tiles.
#include "compiler/lower/contraction_schedule.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/int_math.h"
#include "compiler/lower/linear_form.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

constexpr int kLanes = 16;  // float32 lanes of a 512-bit vector
// Work (multiply-adds) above which a loop goes parallel, and below which the
// generic loop nest is as good as tiling.
constexpr int64_t kParallelWork = 1 << 15;
constexpr int64_t kMinWork = 1 << 14;

struct Tile {
  int mr = 1;
  int nv = 1;
  double cost = 0;  // estimated cycles, from ChooseTile
  int nr() const { return nv * kLanes; }
};

// Cycles an epilogue spends per output vector: a contiguous masked store, or
// a scatter through per-lane row digits (two 8-lane scatters with their
// 64-bit index arithmetic).
constexpr double kStoreCycles = 1;
constexpr int64_t kL1Bytes = 32 << 10;
// KBlockSpan: the packed A size from which K blocks pay, the B block a K
// block keeps in L1, and the most partial-sum memory blocking may take.
constexpr int64_t kKBlockApBytes = int64_t{8} << 20;
constexpr int64_t kKBlockBytes = 24 << 10;
constexpr int64_t kMaxPartialBytes = int64_t{64} << 20;
constexpr double kScatterCycles = 24;
// Cache groups (ChooseCacheGroups): column blocks per group, and the L2
// bytes a group's partial sums and K block of Ap may take.
constexpr int64_t kCacheGroupColumnBlocks = 8;
constexpr int64_t kCacheGroupBytes = 512 << 10;
// PixelParts: row blocks per tile a ragged split may redo, at most.
constexpr int64_t kMaxRedoneTiles = 32;
// A channel-lanes tile's store, per output vector: codegen transposes the
// tile in registers and stores each channel's pixels with one masked store
// (transpose_rows.h): 32 shuffles and 16 masked stores per 16 channels of
// up to 8 pixels. An estimate, not a measurement; with it the stem and the
// 14x14 pointwise convs chose channel lanes and ran 4-30% faster.
constexpr double kTransposedStoreCycles = 3;
// Channel lanes (KBlockSpan): the weight panel size from which K blocks pay,
// and the block of it one K block keeps in L2 for all the row tiles.
constexpr int64_t kLanePanelBytes = 256 << 10;
constexpr int64_t kLaneBlockBytes = 128 << 10;
// Channel lanes store a tile as one short run per channel (6 pixels of 64
// channel planes), row tiles as whole output rows. Once the output is
// larger than the caches hold, those short runs, each a partial line that
// must first be read, ran at memory latency: resnet18's stem at batch 2-8
// took 2.6 ms per image with channel lanes against 1.4 at batch 1, and 1.55
// with row tiles. Beyond this size row tiles are kept where they apply.
// (Flat tiles scatter, and lost to channel lanes at any size.)
constexpr int64_t kLanesStoreCacheBytes = 4 << 20;
// ImagesApart: the padded input size (all images) above which, and the
// pixels per image from which, channel lanes run image by image.
constexpr int64_t kImagesApartBytes = 1 << 20;
constexpr int64_t kImagesApartPixels = 256;

// The tile with the fewest estimated cycles for `rows` independent M x N x K
// products, epilogue included. Ties go to the tile that pads less (zero rows
// still cost packing and stores), then to the larger tile (less loop overhead
// per multiply-add).
Tile ChooseTile(int64_t m, int64_t n, int64_t k, int64_t rows, double store_cycles) {
  Tile best;
  int64_t best_area = 0;
  for (int mr = 1; mr <= 8; ++mr) {
    for (int nv = 1; nv <= 4; ++nv) {
      if (mr * nv + nv > 30) continue;  // accumulators + B vectors in 32 registers
      // FMAs issue on two ports; the MR broadcasts and NV loads measured as
      // if on one (8x32 tiles ran 10-15% slower than 6x64 at equal FMAs per
      // cycle in theory); four cycles of FMA latency per accumulator chain.
      double per_k = std::max({mr * nv / 2.0, (mr + nv) * 1.0, 4.0});
      // A K x NR panel of B beyond L1 streams from L2 once per tile: about
      // 24 bytes a cycle, which wide-and-short tiles (4x64) hit first.
      if (k * nv * kLanes * 4 > kL1Bytes) per_k = std::max(per_k, nv * 64 / 24.0);
      const double tiles = static_cast<double>(CeilDiv(m, mr) * CeilDiv(n, nv * kLanes) * rows);
      const double cost = tiles * (k * per_k + mr * nv * store_cycles);
      const int64_t area = CeilDiv(m, mr) * mr * CeilDiv(n, nv * kLanes) * nv * kLanes;
      bool better = best.cost == 0 || cost < best.cost * 0.999;
      if (!better && cost <= best.cost * 1.001) {
        better = area < best_area || (area == best_area && mr * nv > best.mr * best.nv);
      }
      if (better) {
        best = {mr, nv, cost};
        best_area = area;
      }
    }
  }
  return best;
}

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

int CountLoadsOf(const Expr& e, int buffer) {
  std::unordered_set<const te::ExprNode*> seen;
  int count = 0;
  std::function<void(const Expr&)> visit = [&](const Expr& x) {
    if (!seen.insert(x.get()).second) return;
    if (x->kind == ExprKind::kLoad && x->buffer == buffer) ++count;
    for (const Expr& o : x->operands) visit(o);
  };
  visit(e);
  return count;
}

int64_t Product(const std::vector<Var>& vars) {
  int64_t p = 1;
  for (const Var& v : vars) p *= v->extent;
  return p;
}

class Scheduler {
 public:
  explicit Scheduler(const ContractionTarget& t)
      : t_(t),
        b_(*t.builder),
        value_(t.value),
        out_index_(t.out_index),
        store_predicate_(t.store_predicate) {}

  // The output's size: m_ x n_ per batch element, float32.
  int64_t OutputBytes() const { return m_ * n_ * Product(batch_vars_) * 4; }

  std::optional<ContractionSchedule> Run() {
    if (!Analyse()) return std::nullopt;
    ContractionSchedule out;
    const bool scatter = FlatStoreScatters();
    tile_ = ChooseTile(m_, n_, k_, 1, scatter ? kScatterCycles : kStoreCycles);
    // Tile costs are per batch element; the channel lanes' cover the batch.
    const int64_t batch = Product(batch_vars_);
    std::optional<ChannelLanes> lanes = PlanChannelLanes();
    if (scatter) TryRowTiles();
    if (lanes && row_tiles_ && OutputBytes() > kLanesStoreCacheBytes) lanes.reset();
    if (lanes && lanes->tile.cost < tile_.cost * batch) UseChannelLanes(*lanes);
    mb_ = CeilDiv(m_, tile_.mr);
    nb_ = CeilDiv(n_, tile_.nr());
    std::vector<Stmt> stages;
    a_in_place_ = channel_lanes_ || BroadcastReadableInPlace(fa_);
    if (!a_in_place_) a_buffer_ = PackOperand(/*is_a=*/true, out, stages);
    direct_b_ = ReadableInPlace(fb_);
    if (!direct_b_) b_buffer_ = PackOperand(/*is_a=*/false, out, stages);
    stages.push_back(MainLoop(stages));
    out.body = MakeSeq(std::move(stages));
    out.summary = absl::StrCat("gemm ", tile_.mr, "x", tile_.nr(), " M=", m_, " N=", n_, " K=", k_,
                               " batch=", Product(batch_vars_), row_tiles_ ? " (row tiles)" : "",
                               channel_lanes_ ? " (channel lanes)" : "",
                               k_blocked_ ? " (K blocks)" : "", cache_groups_);
    out.row_tiles = row_tiles_;
    return out;
  }

 private:
  bool Analyse() {
    std::vector<Expr> reduces = ReducesOf(value_);
    if (reduces.size() != 1) return false;
    reduce_ = reduces[0];
    if (reduce_->reduce_op() != te::ReduceOp::kSum || reduce_->type != te::ScalarType::kF32) {
      return false;
    }
    const Expr& body = reduce_->operands[0];
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
      if (!DependsOn(reduce_, v.get())) return false;  // the epilogue broadcasts
    }
    fa_ = body->operands[0];
    fb_ = body->operands[1];
    const te::VarNode* x = outs.back().get();
    const bool in_a = DependsOn(fa_, x), in_b = DependsOn(fb_, x);
    if (in_a && in_b) return false;
    if (in_a) std::swap(fa_, fb_);
    size_t first_n = outs.size();
    while (first_n > 0 && DependsOn(fb_, outs[first_n - 1].get()) &&
           !DependsOn(fa_, outs[first_n - 1].get())) {
      --first_n;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const bool a = DependsOn(fa_, outs[i].get()), bdep = DependsOn(fb_, outs[i].get());
      if (i >= first_n) {
        n_vars_.push_back(outs[i]);
      } else if (a && !bdep) {
        m_vars_.push_back(outs[i]);
      } else {
        batch_vars_.push_back(outs[i]);
      }
    }
    for (const Var& v : reduce_->reduce_vars) {
      if (v->extent != 1) k_vars_.push_back(v);
    }
    m_ = Product(m_vars_);
    n_ = Product(n_vars_);
    k_ = Product(k_vars_);
    return k_ >= 8 && n_ >= kLanes && m_ * n_ * k_ * Product(batch_vars_) >= kMinWork;
  }

  // `flat` split into one index per variable of `vars`, row-major. The
  // outermost takes the quotient without a modulus, so the split flattens
  // back to `flat` exactly (see linear_form.h).
  std::vector<Expr> Split(const Expr& flat, const std::vector<Var>& vars) {
    std::vector<Expr> parts(vars.size());
    Expr rest = flat;
    for (size_t i = vars.size(); i-- > 0;) {
      if (i == 0) {
        parts[i] = rest;
      } else {
        parts[i] = b_.Mod(rest, b_.Int(vars[i]->extent));
        rest = b_.Div(rest, b_.Int(vars[i]->extent));
      }
    }
    return parts;
  }

  Expr Flat(const std::vector<Var>& vars) {
    Expr flat = b_.Int(0);
    for (const Var& v : vars) flat = b_.Add(b_.Mul(flat, b_.Int(v->extent)), b_.Ref(v));
    return flat;
  }

  std::vector<Var> BatchVarsOf(const Expr& e) {
    std::vector<Var> vars;
    for (const Var& v : batch_vars_) {
      if (DependsOn(e, v.get())) vars.push_back(v);
    }
    return vars;
  }

  // Packs fa (is_a) or fb into its panel buffer; returns the buffer id.
  int PackOperand(bool is_a, ContractionSchedule& out, std::vector<Stmt>& stages) {
    const Expr& f = is_a ? fa_ : fb_;
    const std::vector<Var>& rows = is_a ? m_vars_ : n_vars_;
    const int64_t extent = is_a ? m_ : n_;
    const int64_t blocks = is_a ? mb_ : nb_;
    const int width = is_a ? tile_.mr : tile_.nr();
    std::vector<Var> batch = BatchVarsOf(f);
    (is_a ? a_batch_ : b_batch_) = batch;
    const int64_t elements = Product(batch) * blocks * k_ * width;

    if (batch.empty()) {
      if (auto packed = PackConstant(f, rows, blocks, width)) {
        (*t_.buffers)[f->buffer].num_elements = elements;
        (*t_.buffers)[f->buffer].name += ".packed";
        out.packed_constants.emplace_back(f->buffer, std::move(packed));
        return f->buffer;
      }
    }

    const int buffer = static_cast<int>(t_.buffers->size());
    t_.buffers->push_back({is_a ? "a_panel" : "b_panel", te::ScalarType::kF32, elements});
    Var block = b_.NewVar(is_a ? "ib" : "jb", blocks);
    Var k = b_.NewVar("k", k_);
    // Panels as wide as whole registers are packed with explicit vectors.
    const bool whole_vectors = width % kLanes == 0;
    Var lane_block = b_.NewVar(is_a ? "rr" : "vv", width / kLanes);
    Var lane = b_.NewVar(is_a ? "r" : "v", whole_vectors ? kLanes : width);
    Expr lane_ref = whole_vectors ? b_.Add(b_.Mul(b_.Ref(lane_block), b_.Int(kLanes)), b_.Ref(lane))
                                  : b_.Ref(lane);
    Expr row = b_.Add(b_.Mul(b_.Ref(block), b_.Int(width)), lane_ref);
    const bool padded = blocks * width != extent;
    // A contiguous operand is copied with vector loads; past the last row
    // they would read beyond the buffer, so they are masked there instead of
    // clamped (a clamp would make them gathers) and the rows filled with zeros.
    const bool contiguous = ContiguousAlong(f, rows);
    std::vector<Var> from = rows;
    std::vector<Expr> to = contiguous ? Split(row, rows)
                                      : RowDigits(row, rows, blocks * width, extent, stages);
    std::vector<Expr> k_parts = Split(b_.Ref(k), k_vars_);
    from.insert(from.end(), k_vars_.begin(), k_vars_.end());
    to.insert(to.end(), k_parts.begin(), k_parts.end());
    Expr value = b_.Substitute(f, from, to);
    Expr inside = padded ? b_.Compare(te::CompareOp::kLT, row, b_.Int(extent)) : nullptr;
    if (padded && !contiguous) value = b_.Select(inside, value, b_.Float(0));
    std::vector<Var> loops = batch;
    loops.push_back(block);
    Expr index = b_.Add(b_.Mul(b_.Add(b_.Mul(Flat(loops), b_.Int(k_)), b_.Ref(k)),
                               b_.Int(width)),
                        lane_ref);
    Stmt store = MakeStore(buffer, index, value);
    if (padded && contiguous) {
      store = MakeSeq({MakeStore(buffer, index, b_.Float(0)),
                       MakeStore(buffer, index, value, inside)});
    }
    Stmt body;
    if (whole_vectors) {
      body = MakeFor(lane_block, ForKind::kUnrolled, MakeFor(lane, ForKind::kVector, store));
    } else {
      body = MakeFor(lane, ForKind::kVectorized, store);
    }
    body = MakeFor(k, ForKind::kSerial, body);
    for (size_t i = loops.size(); i-- > 0;) {
      const bool parallel = i == 0 && elements >= kParallelWork;
      body = MakeFor(loops[i], parallel ? ForKind::kParallel : ForKind::kSerial, body);
    }
    stages.push_back(body);
    return buffer;
  }

  // Whether tiles over the flattened N would store through per-lane digits:
  // the output is not contiguous along N (conv computed over padded rows).
  bool FlatStoreScatters() {
    if (n_vars_.size() <= 1) return false;
    return !StepsByOne(out_index_, n_vars_, n_);
  }

  // Row tiles: N is only the innermost N variable and the outer ones become
  // loops around the tiles, so a tile row is one contiguous run of an output
  // row (a masked store, no scatter) at the price of padding each row to
  // whole tiles. Taken when fb is read in place along that row and the
  // estimate beats the flat tiles -- always for depthwise convs, where K = 9
  // multiply-adds per output cannot hide a scatter.
  void TryRowTiles() {
    const Var inner = n_vars_.back();
    const Expr& f = fb_;
    if (f->kind != ExprKind::kLoad || f->buffer != t_.conv_input || !t_.conv_input_has_slack) {
      return;
    }
    if (StrideAlong(f->operands[0], inner.get()) != 1) return;
    if (StrideAlong(out_index_, inner.get()) != 1) return;
    const int64_t rows = n_ / inner->extent;
    const Tile row = ChooseTile(m_, inner->extent, k_, rows, kStoreCycles);
    if (row.cost >= tile_.cost) return;
    batch_vars_.insert(batch_vars_.end(), n_vars_.begin(), n_vars_.end() - 1);
    n_vars_ = {inner};
    n_ = inner->extent;
    tile_ = row;
    row_tiles_ = true;
  }

  // Channel lanes: the tile's lanes run over output channels and its rows
  // over output pixels -- the transpose of the conv's usual tiling. Convs with
  // few pixels per image waste lanes tiled over pixels: 7x7 outputs fill 49
  // of the 64 lanes of a padded-row tile (63 computed), 14x14 ones 196 of
  // 240. Output channels come in multiples of 16, so channel lanes waste
  // none. The store goes along channels once per tile: codegen transposes
  // the tile in registers and stores each channel's pixels with one masked
  // store (it was a scatter per pixel, 10% of a K = 576 conv). The weights
  // become the lane operand, packed once at compile time, and the input is
  // read in place, one broadcast per pixel and k. The pixels exclude the
  // padded rows' extra columns: the store predicate that masks them is
  // folded into a narrower domain. Planned on the flat classification
  // (before row tiles), taken when its estimate beats the schedule otherwise
  // chosen.
  struct ChannelLanes {
    Tile tile;
    std::vector<Var> pixels, batch;
    // The domain narrowing, when there is a store predicate: the padded-row
    // variable and its narrower twin.
    Var wide, narrow;
    bool images_apart = false;  // see ImagesApart
  };

  std::optional<ChannelLanes> PlanChannelLanes() {
    if (t_.conv_input < 0 || fb_->kind != ExprKind::kLoad || fb_->buffer != t_.conv_input) {
      return std::nullopt;
    }
    if (fa_->kind != ExprKind::kLoad || t_.constant_of(fa_->buffer) == nullptr) {
      return std::nullopt;
    }
    ChannelLanes plan;
    plan.images_apart = ImagesApart();
    for (const Var& v : batch_vars_)
      (DependsOn(fa_, v.get()) || plan.images_apart ? plan.batch : plan.pixels).push_back(v);
    plan.pixels.insert(plan.pixels.end(), n_vars_.begin(), n_vars_.end());
    if (store_predicate_) {
      const Expr& p = store_predicate_;
      if (p->kind != ExprKind::kCompare || p->compare_op() != te::CompareOp::kLT ||
          p->operands[0]->kind != ExprKind::kVar || p->operands[1]->kind != ExprKind::kIntImm) {
        return std::nullopt;
      }
      auto it = std::find_if(plan.pixels.begin(), plan.pixels.end(),
                             [&](const Var& v) { return v.get() == p->operands[0]->var.get(); });
      if (it == plan.pixels.end()) return std::nullopt;
      plan.wide = *it;
      plan.narrow = *it = b_.NewVar((*it)->name, p->operands[1]->int_value);
    }
    plan.tile =
        ChooseTile(Product(plan.pixels), m_, k_, Product(plan.batch), kTransposedStoreCycles);
    return plan;
  }

  // Whether channel lanes keep the images apart, as a batch dimension run
  // image by image, instead of joining them to the pixels: where the padded
  // input of all images outgrows L2 and each image has pixels enough for
  // tiles of its own. Lowering then copies each image's padded input just
  // before its tiles (FillPerImage), so the tiles read it from L2 instead of
  // from a copy of all images made up front. A small gain (resnet18 b8, 1
  // thread, minimums of 5 runs: 164.6-172.3 ms against 166.4-177.3; 2
  // threads unchanged): its 56x56 convs still take about 1.3x their batch-1
  // time per image, which the copy did not explain.
  bool ImagesApart() const {
    if (!t_.conv_input_has_slack || batch_vars_.empty()) return false;
    const int64_t padded_bytes = (*t_.buffers)[t_.conv_input].num_elements * 4;
    return padded_bytes > kImagesApartBytes && Product(n_vars_) >= kImagesApartPixels;
  }

  void UseChannelLanes(const ChannelLanes& plan) {
    if (plan.wide) {
      value_ = b_.Substitute(value_, {plan.wide}, {b_.Ref(plan.narrow)});
      out_index_ = b_.Substitute(out_index_, {plan.wide}, {b_.Ref(plan.narrow)});
      store_predicate_ = nullptr;
      reduce_ = ReducesOf(value_)[0];
    }
    // fa becomes the input (broadcast per pixel), fb the weights (lanes).
    const Expr& body = reduce_->operands[0];
    const bool weights_first = body->operands[0]->kind == ExprKind::kLoad &&
                               t_.constant_of(body->operands[0]->buffer) != nullptr;
    fa_ = body->operands[weights_first ? 1 : 0];
    fb_ = body->operands[weights_first ? 0 : 1];
    n_vars_ = m_vars_;
    m_vars_ = plan.pixels;
    batch_vars_ = plan.batch;
    n_ = m_;
    m_ = Product(m_vars_);
    tile_ = plan.tile;
    row_tiles_ = false;
    channel_lanes_ = true;
    images_apart_ = plan.images_apart;
  }

  // Whether fb can be loaded by the micro-kernel as it is: a plain load whose
  // index steps by one along N, that a tile may overrun.
  bool ReadableInPlace(const Expr& f) {
    if (f->kind != ExprKind::kLoad) return false;
    const bool exact = nb_ * tile_.nr() == n_;
    const bool may_overrun = f->buffer == t_.conv_input && t_.conv_input_has_slack;
    if (!may_overrun && !exact) return false;
    if (t_.constant_of(f->buffer) != nullptr) return false;  // packing it once is better
    return StepsByOne(f->operands[0], n_vars_, n_ + tile_.nr());
  }

  // Whether the broadcast operand `f` may be read in place instead of packed
  // per call: a plain load of an activation (a constant is packed once, at
  // compile time) that steps by one element along the innermost reduction
  // variable, so each tile row streams one contiguous run. Packing it cost a
  // strided pass over A and, at 2 threads, a second parallel region.
  bool BroadcastReadableInPlace(const Expr& f) {
    if (f->kind != ExprKind::kLoad || t_.constant_of(f->buffer) != nullptr) return false;
    // Where the reduction runs in K blocks, packed panels were measured (the
    // cache groups); in place there gave mixed results at 2048^3.
    if (KBlockSpan() > 0) return false;
    return StepsByOne(f->operands[0], {k_vars_.back()}, k_vars_.back()->extent);
  }

  // Whether `f`'s index steps by one element along `rows` flattened: its
  // digits then fold back into the flat row, so packing needs no digit tables
  // (a 1x1 conv's input over its pixels).
  bool ContiguousAlong(const Expr& f, const std::vector<Var>& rows) {
    if (f->kind != ExprKind::kLoad || rows.size() <= 1) return false;
    return StepsByOne(f->operands[0], rows, Product(rows));
  }

  // Whether `index` steps by one element as `vars`, flattened, step by one
  // (a probe over `extent` values stands for the flat position).
  bool StepsByOne(const Expr& index, const std::vector<Var>& vars, int64_t extent) {
    Var probe = b_.NewVar("probe", extent);
    Expr at = b_.Substitute(index, vars, Split(b_.Ref(probe), vars));
    return StrideAlong(at, probe.get()) == 1;
  }

  // The per-variable digits of `row` (a flat index over `rows`, up to
  // `padded_extent`, clamped to `extent` - 1). With several variables the
  // digits come from small i64 tables filled by a stage of their own, so the
  // vectorised packing loop does no 64-bit division (which AVX-512 lacks).
  std::vector<Expr> RowDigits(const Expr& row, const std::vector<Var>& rows,
                              int64_t padded_extent, int64_t extent, std::vector<Stmt>& stages) {
    const bool padded = padded_extent != extent;
    if (rows.size() <= 1) return Split(padded ? b_.Min(row, b_.Int(extent - 1)) : row, rows);
    Var t = b_.NewVar("t", padded_extent);
    Expr clamped = padded ? b_.Min(b_.Ref(t), b_.Int(extent - 1)) : b_.Ref(t);
    std::vector<Expr> digits = Split(clamped, rows);
    std::vector<Expr> loads;
    for (size_t i = 0; i < rows.size(); ++i) {
      const int table = static_cast<int>(t_.buffers->size());
      t_.buffers->push_back({absl::StrCat(rows[i]->name, "_of_row"), te::ScalarType::kI64,
                             padded_extent});
      stages.push_back(MakeFor(t, ForKind::kSerial, MakeStore(table, b_.Ref(t), digits[i])));
      loads.push_back(b_.Load(table, te::ScalarType::kI64, {row}));
    }
    return loads;
  }

  // The packed panels of `f` when it is a plain load of a constant at an
  // index affine in the loop variables; null otherwise.
  std::shared_ptr<const ConstantData> PackConstant(const Expr& f, const std::vector<Var>& rows,
                                                   int64_t blocks, int width) {
    if (f->kind != ExprKind::kLoad || f->type != te::ScalarType::kF32) return nullptr;
    const ConstantData* data = t_.constant_of(f->buffer);
    if (data == nullptr || CountLoadsOf(t_.value, f->buffer) != 1) return nullptr;
    std::optional<LinearForm> form = AffineInVars(f->operands[0]);
    if (!form) return nullptr;
    auto coefficient = [&](const Var& v) -> int64_t {
      auto it = form->terms.find(b_.Ref(v).get());
      return it == form->terms.end() ? 0 : it->second;
    };
    // Offsets of each flattened row and k, summed per element.
    auto offsets = [&](const std::vector<Var>& vars, int64_t count) {
      std::vector<int64_t> off(count, 0);
      for (int64_t flat = 0; flat < count; ++flat) {
        int64_t rest = flat, sum = 0;
        for (size_t i = vars.size(); i-- > 0;) {
          sum += coefficient(vars[i]) * (rest % vars[i]->extent);
          rest /= vars[i]->extent;
        }
        off[flat] = sum;
      }
      return off;
    };
    const int64_t extent = Product(rows);
    std::vector<int64_t> row_off = offsets(rows, extent);
    std::vector<int64_t> k_off = offsets(k_vars_, k_);
    const int64_t source_elements = data->type.NumElements();
    const float* src = data->data<float>();
    auto packed = std::make_shared<ConstantData>();
    const int64_t elements = blocks * k_ * width;
    packed->type = TensorType{DType::kFloat32, {blocks, k_, width}};
    packed->bytes.assign(static_cast<size_t>(elements) * sizeof(float), '\0');
    float* dst = reinterpret_cast<float*>(packed->bytes.data());
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int64_t k = 0; k < k_; ++k) {
        for (int lane = 0; lane < width; ++lane) {
          const int64_t row = blk * width + lane;
          if (row >= extent) continue;
          const int64_t at = form->constant + row_off[row] + k_off[k];
          if (at < 0 || at >= source_elements) return nullptr;  // not a plain read after all
          dst[(blk * k_ + k) * width + lane] = src[at];
        }
      }
    }
    return packed;
  }

  // How many values of the outermost reduction variable one K block spans,
  // or 0 for no blocking. Without blocks, every column block streams all of
  // Ap (M x K) past its B panel: once Ap outgrows L2, a pass over L3 (or
  // memory) per column block. In K blocks of KC rows (a KC x NR block of B
  // in L1, 24 KB) only an M x KC slice of Ap is live; the partial sums go
  // to a buffer between blocks. Measured on 1 thread, five interleaved runs
  // each: 2048^3 (16 MB of Ap) went from 134-137 to 129-195 GFLOPS (median
  // 160); 1024^3 (4 MB) from 211-213 to 202-205, and resnet18's 256-channel
  // 3x3 convs (2.4 MB, 5 column blocks) from 1.42 to 1.70 ms. So blocking
  // takes Ap past 8 MB and 8 or more column blocks re-reading it. Blocks
  // split the outermost reduction variable (conv's input channel) so inner
  // window offsets stay affine, and must divide it exactly. The column
  // blocks (with the batch) are also what the pool shares out: the K block
  // loop itself is serial.
  // With channel lanes the streamed operand is the other one: each row tile
  // rereads the K x NR weight panel, so K blocks keep a 128 KB block of it
  // in L2 for all the row tiles once the panel passes 256 KB (resnet18's
  // 7x7 convs: 1.78 -> 1.43 ms, 14x14: 1.61 -> 1.25, in one run).
  int64_t KBlockSpan() const {
    const int nr = tile_.nr();
    if (k_vars_.empty()) return 0;
    int64_t target = kKBlockBytes / (nr * 4);
    if (channel_lanes_) {
      if (k_ * nr * 4 <= kLanePanelBytes || mb_ < 2) return 0;
      target = kLaneBlockBytes / (nr * 4);
    } else {
      if (mb_ * tile_.mr * k_ * 4 <= kKBlockApBytes) return 0;
      if (Product(batch_vars_) * nb_ < 8) return 0;
    }
    const int64_t outer = k_vars_[0]->extent;
    const int64_t inner = k_ / outer;
    int64_t span = 0;
    for (int64_t d = 1; d < outer; ++d) {
      if (outer % d == 0 && d * inner <= target) span = d;
    }
    if (span * inner * 2 < target) return 0;  // blocks too short to pay for the partial sums
    const int64_t partial_bytes = Product(batch_vars_) * nb_ * mb_ * tile_.mr * nr * 4;
    if (partial_bytes > kMaxPartialBytes) return 0;
    return span;
  }

  // K blocks alone keep a K block of B in L1 and one column block's partial
  // sums in L2, but every column block streams all of Ap past them again:
  // at 2048^3 that is 16 MB from L3 per 64 columns. Cache groups share each
  // K block of Ap among G column blocks and cut it to R row blocks, so the
  // group's partial sums and its slice of Ap stay in L2 across the K blocks:
  //     for jg (parallel), ig:  for kc:  for jbi < G:  for ibi < R:  tile
  // G and R divide the block counts (loops have fixed extents). Measured on
  // 2048^3, interleaved runs: 1 thread 137-141 -> 181-191 GFLOPS, 2 threads
  // 285-297 -> 352-372 with G = 8 and 512 KB; G = 4 gave 163-169 / 317-340,
  // G = 16 or budgets of 384 KB to 1 MB about the same as G = 8.
  struct CacheGroups {
    int64_t col_blocks = 1;  // G
    int64_t row_blocks = 1;  // R
  };
  CacheGroups ChooseCacheGroups(int64_t kc_rows) const {
    CacheGroups g;
    if (channel_lanes_) return g;
    const int64_t mr = tile_.mr, nr = tile_.nr();
    // At least two groups of columns, for the pool to share out.
    for (int64_t d = 1; d <= std::min(nb_ / 2, kCacheGroupColumnBlocks); ++d) {
      if (nb_ % d == 0) g.col_blocks = d;
    }
    for (int64_t d = 1; d <= mb_; ++d) {
      const int64_t rows = d * mr;
      const int64_t bytes = rows * (g.col_blocks * nr + kc_rows) * 4;  // partial sums + Ap slice
      if (mb_ % d == 0 && bytes <= kCacheGroupBytes) g.row_blocks = d;
    }
    return g;
  }

  Stmt MainLoop(std::vector<Stmt>& stages) {
    const int mr = tile_.mr, nr = tile_.nr();
    Var jb = b_.NewVar("jb", nb_);
    Var ib = b_.NewVar("ib", mb_);
    Var r = b_.NewVar("r", mr);
    // A tile row is NV registers of kLanes: vectors wider than a register
    // (and not a power of two) legalise poorly.
    Var vv = b_.NewVar("vv", tile_.nv);
    Var lane = b_.NewVar("v", kLanes);
    Expr v_ref = b_.Add(b_.Mul(b_.Ref(vv), b_.Int(kLanes)), b_.Ref(lane));
    const int acc = static_cast<int>(t_.buffers->size());
    t_.buffers->push_back({"acc", te::ScalarType::kF32, int64_t{mr} * nr, /*local=*/true});
    Expr acc_index = b_.Add(b_.Mul(b_.Ref(r), b_.Int(nr)), v_ref);
    Expr acc_value = b_.Load(acc, te::ScalarType::kF32, {acc_index});

    auto panel_index = [&](const std::vector<Var>& batch, const Var& block, int width,
                           const Expr& offset) {
      std::vector<Var> outer = batch;
      outer.push_back(block);
      return b_.Add(b_.Mul(b_.Add(b_.Mul(Flat(outer), b_.Int(k_)), Flat(k_vars_)), b_.Int(width)),
                    offset);
    };
    Expr m = b_.Add(b_.Mul(b_.Ref(ib), b_.Int(mr)), b_.Ref(r));
    Expr n = b_.Add(b_.Mul(b_.Ref(jb), b_.Int(nr)), v_ref);
    // Read in place, the tail tile's extra rows reread the last one.
    Expr pixel = mb_ * mr == m_ ? m : b_.Min(m, b_.Int(m_ - 1));
    Expr a = a_in_place_ ? b_.Substitute(fa_, m_vars_, Split(pixel, m_vars_))
                         : b_.Load(a_buffer_, te::ScalarType::kF32,
                                   {panel_index(a_batch_, ib, mr, b_.Ref(r))});
    Expr bv = direct_b_
                  ? b_.Substitute(fb_, n_vars_, Split(n, n_vars_))
                  : b_.Load(b_buffer_, te::ScalarType::kF32, {panel_index(b_batch_, jb, nr, v_ref)});

    auto tile_loop = [&](Stmt s) {
      return MakeFor(r, ForKind::kUnrolled,
                     MakeFor(vv, ForKind::kUnrolled, MakeFor(lane, ForKind::kVector, std::move(s))));
    };
    // K blocking (KBlockSpan): the outermost reduction variable becomes
    // kc * span + kci, kc a serial loop between the column and row blocks.
    const int64_t span = KBlockSpan();
    Var kc;
    std::vector<Var> k_loops = k_vars_;
    if (span > 0) {
      kc = b_.NewVar("kc", k_vars_[0]->extent / span);
      k_loops[0] = b_.NewVar("kci", span);
      Expr outer_k = b_.Add(b_.Mul(b_.Ref(kc), b_.Int(span)), b_.Ref(k_loops[0]));
      a = b_.Substitute(a, {k_vars_[0]}, {outer_k});
      bv = b_.Substitute(bv, {k_vars_[0]}, {outer_k});
      k_blocked_ = true;
    }
    // The partial sums of a tile between K blocks: [batch][jb][ib][r][NR].
    int partial = -1;
    Expr partial_index, last_block;
    Expr init_value = b_.Float(0);
    if (span > 0) {
      partial = static_cast<int>(t_.buffers->size());
      t_.buffers->push_back({"partial_sums", te::ScalarType::kF32,
                             Product(batch_vars_) * nb_ * mb_ * mr * nr});
      std::vector<Var> tile_vars = batch_vars_;
      tile_vars.push_back(jb);
      tile_vars.push_back(ib);
      partial_index = b_.Add(b_.Mul(Flat(tile_vars), b_.Int(int64_t{mr} * nr)), acc_index);
      last_block = b_.Compare(te::CompareOp::kEQ, b_.Ref(kc), b_.Int(kc->extent - 1));
      init_value = b_.Select(b_.Compare(te::CompareOp::kEQ, b_.Ref(kc), b_.Int(0)), init_value,
                             b_.Load(partial, te::ScalarType::kF32, {partial_index}));
    }
    Stmt init = tile_loop(MakeStore(acc, acc_index, init_value));
    // One loop per reduction variable, so window offsets stay affine in
    // loop variables (no division per step).
    Stmt update = tile_loop(MakeStore(acc, acc_index, b_.Add(acc_value, b_.Mul(a, bv))));
    for (size_t i = k_loops.size(); i-- > 0;) update = MakeFor(k_loops[i], ForKind::kSerial, update);

    // The epilogue: the output element with the reduction read from acc and
    // the output variables rebuilt from the tile position.
    std::vector<Var> from = m_vars_;
    std::vector<Expr> to = Split(m, m_vars_);
    std::vector<Expr> n_parts = Split(n, n_vars_);
    // When the output is not contiguous along the tile's lanes (conv over
    // padded rows), its digits come from tables: a scatter with per-lane
    // 64-bit division would cost as much as the tile's multiply-adds.
    if (n_vars_.size() > 1 &&
        StrideAlong(b_.Substitute(out_index_, n_vars_, n_parts), lane.get()) != 1) {
      n_parts = RowDigits(n, n_vars_, nb_ * nr, n_, stages);
    }
    from.insert(from.end(), n_vars_.begin(), n_vars_.end());
    to.insert(to.end(), n_parts.begin(), n_parts.end());
    Expr epilogue = b_.Substitute(b_.Replace(value_, reduce_, acc_value), from, to);
    Expr out_index = b_.Substitute(out_index_, from, to);
    Expr predicate;
    auto conjoin = [&](Expr c) {
      predicate = predicate ? b_.Binary(te::BinaryOp::kAnd, predicate, c) : c;
    };
    if (mb_ * mr != m_) conjoin(b_.Compare(te::CompareOp::kLT, m, b_.Int(m_)));
    if (nb_ * nr != n_) conjoin(b_.Compare(te::CompareOp::kLT, n, b_.Int(n_)));
    if (store_predicate_) conjoin(b_.Substitute(store_predicate_, from, to));
    if (span > 0) conjoin(last_block);
    Stmt store = tile_loop(MakeStore(t_.out_buffer, out_index, epilogue, predicate));

    std::vector<Stmt> tile = {init, update};
    if (span > 0) {
      tile.push_back(tile_loop(MakeStore(partial, partial_index, acc_value,
                                         b_.Unary(te::UnaryOp::kNot, last_block))));
    }
    tile.push_back(store);
    // The tile's statements at column block `jb_of` and row block `ib_of`
    // (for loops that reach the blocks through other variables).
    auto tile_at = [&](const Expr& jb_of, const Expr& ib_of) {
      return MapExprs(MakeSeq(std::move(tile)), [&](const Expr& e) {
        return e ? b_.Substitute(e, {jb, ib}, {jb_of, ib_of}) : e;
      });
    };
    const bool parallel = m_ * n_ * k_ * Product(batch_vars_) >= kParallelWork;
    if (parallel && (batch_vars_.empty() || images_apart_) && span == 0 && nb_ * mb_ > 1) {
      // One parallel loop over all tiles, column-block-major as the serial
      // order: the pool's contiguous chunks then balance to a tile, where
      // sharing out column blocks alone left threads idle when there are few
      // (resnet18's 256-channel 3x3 convs: 5 blocks for 2 threads).
      // With channel lanes the row blocks are pixels: split into parts
      // outside the column blocks, a thread's tiles cover the pixels (and
      // images) that its share of the producer wrote, as flat tiles do.
      // (With one part, the index simplifier folds the part away.) Where the
      // parts do not divide the row blocks, the last part's few extra tiles
      // redo the last row block: the same values to the same places, which
      // costs less than handing a thread whole column blocks of pixels the
      // other thread wrote.
      const int64_t parts = PixelParts();
      const int64_t per_part = CeilDiv(mb_, parts);
      Var t = b_.NewVar("tile", nb_ * per_part * parts);
      Expr part = b_.Div(b_.Ref(t), b_.Int(nb_ * per_part));
      Expr rest = b_.Mod(b_.Ref(t), b_.Int(nb_ * per_part));
      Expr jb_of = b_.Div(rest, b_.Int(per_part));
      Expr ib_of = b_.Add(b_.Mul(part, b_.Int(per_part)), b_.Mod(rest, b_.Int(per_part)));
      if (per_part * parts != mb_) ib_of = b_.Min(ib_of, b_.Int(mb_ - 1));
      // Images kept apart run in turn, each with all threads on its tiles.
      Stmt flat = MakeFor(t, ForKind::kParallel, tile_at(jb_of, ib_of));
      for (size_t i = batch_vars_.size(); i-- > 0;) {
        flat = MakeFor(batch_vars_[i], ForKind::kSerial, flat);
      }
      return flat;
    }
    Stmt body;
    const CacheGroups groups =
        span > 0 ? ChooseCacheGroups(span * (k_ / k_vars_[0]->extent)) : CacheGroups{};
    if (groups.col_blocks > 1 || groups.row_blocks > 1) {
      // jb = jg * G + jbi, ib = ig * R + ibi:  jg, ig, kc, jbi, ibi.
      Var jg = b_.NewVar("jg", nb_ / groups.col_blocks);
      Var jbi = b_.NewVar("jbi", groups.col_blocks);
      Var ig = b_.NewVar("ig", mb_ / groups.row_blocks);
      Var ibi = b_.NewVar("ibi", groups.row_blocks);
      Expr jb_of = b_.Add(b_.Mul(b_.Ref(jg), b_.Int(groups.col_blocks)), b_.Ref(jbi));
      Expr ib_of = b_.Add(b_.Mul(b_.Ref(ig), b_.Int(groups.row_blocks)), b_.Ref(ibi));
      body = MakeFor(ibi, ForKind::kSerial, tile_at(jb_of, ib_of));
      body = MakeFor(jbi, ForKind::kSerial, body);
      body = MakeFor(kc, ForKind::kSerial, body);
      body = MakeFor(ig, ForKind::kSerial, body);
      body = MakeFor(jg, ForKind::kSerial, body);
      cache_groups_ =
          absl::StrCat(" (cache groups ", groups.col_blocks, "x", groups.row_blocks, ")");
    } else {
      body = MakeFor(ib, ForKind::kSerial, MakeSeq(std::move(tile)));
      if (span > 0) body = MakeFor(kc, ForKind::kSerial, body);
      body = MakeFor(jb, ForKind::kSerial, body);
    }
    for (size_t i = batch_vars_.size(); i-- > 0;) {
      body = MakeFor(batch_vars_[i], ForKind::kSerial, body);
    }
    if (parallel) {
      bool placed = false;
      body = MarkFirstParallel(body, kc.get(), placed);
    }
    return body;
  }

  // How many parts the flat tile loop splits the row blocks into: with
  // channel lanes, enough for a thread's tiles to keep to its pixels at 2 or
  // 4 threads, each part at least 2 tiles; otherwise 1 (the column blocks
  // are the pixels already). Parts that divide the row blocks are preferred;
  // otherwise the last part is padded by redoing its last tile, at most one
  // tile in kMaxRedoneTiles (7x7 outputs: 7 tiles stay whole). Requiring an
  // exact division had left 28x28 outputs (131 tiles of 6 pixels) split by
  // column blocks, so at 2 threads each thread read the whole input, half
  // of it from the other core (resnet18 b8, 2 threads: its stride-2 3x3
  // convs took 0.82-0.89x their earlier time with the parts).
  int64_t PixelParts() const {
    if (!channel_lanes_) return 1;
    for (int64_t parts : {4, 2}) {
      if (mb_ % parts == 0 && mb_ / parts >= 2) return parts;
    }
    for (int64_t parts : {4, 2}) {
      const int64_t redone = CeilDiv(mb_, parts) * parts - mb_;
      if (mb_ / parts >= 2 && redone * kMaxRedoneTiles <= mb_) return parts;
    }
    return 1;
  }

  // `s` with the outermost loop of extent > 1 made parallel, looking no
  // deeper than `stop` (the K block loop, whose blocks must run in order).
  static Stmt MarkFirstParallel(const Stmt& s, const te::VarNode* stop, bool& placed) {
    if (placed || s->kind != StmtKind::kFor || s->for_kind != ForKind::kSerial) return s;
    if (s->var.get() == stop) return s;
    if (s->var->extent > 1) {
      placed = true;
      return MakeFor(s->var, ForKind::kParallel, s->children[0]);
    }
    return MakeFor(s->var, s->for_kind, MarkFirstParallel(s->children[0], stop, placed));
  }

  const ContractionTarget& t_;
  te::ExprBuilder& b_;
  // The target's value, output index and store predicate, as narrowed by
  // UseChannelLanes.
  Expr value_, out_index_, store_predicate_;
  Expr reduce_, fa_, fb_;
  std::vector<Var> m_vars_, n_vars_, k_vars_, batch_vars_;
  std::vector<Var> a_batch_, b_batch_;
  int64_t m_ = 1, n_ = 1, k_ = 1, mb_ = 1, nb_ = 1;
  Tile tile_;
  int a_buffer_ = -1, b_buffer_ = -1;
  bool direct_b_ = false;
  // fa is read in place, not from packed panels: with channel lanes, or
  // where BroadcastReadableInPlace allows.
  bool a_in_place_ = false;
  bool row_tiles_ = false;
  bool channel_lanes_ = false;
  bool images_apart_ = false;  // channel lanes with the images apart (ImagesApart)
  bool k_blocked_ = false;
  // " (cache groups GxR)" when ChooseCacheGroups applied, for the summary.
  std::string cache_groups_;
};

}  // namespace

std::optional<ContractionSchedule> ScheduleContraction(const ContractionTarget& target) {
  Scheduler scheduler(target);
  return scheduler.Run();
}

}  // namespace kiln::lower
