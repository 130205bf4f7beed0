#include "compiler/lower/contraction_emit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/int_math.h"
#include "compiler/lower/linear_form.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;
using LoopOrder = ContractionPlan::LoopOrder;

constexpr int64_t kCacheLineBytes = 64;
// Panels below this (a third of a 48 KB L1) are left to the hardware
// prefetcher: one pass over them is too short for the stall to matter.
constexpr int64_t kMinPrefetchPanelBytes = 16 << 10;

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

class Emitter {
 public:
  Emitter(const ContractionTarget& t, const ContractionOperands& ops, const ContractionPlan& plan,
          const ContractionKnobs& knobs)
      : t_(t),
        b_(*t.builder),
        plan_(plan),
        knobs_(knobs),
        value_(ops.value),
        out_index_(ops.out_index),
        store_predicate_(ops.store_predicate),
        reduce_(ops.reduce),
        fa_(ops.fa),
        fb_(ops.fb),
        m_vars_(ops.m_vars),
        n_vars_(ops.n_vars),
        k_vars_(ops.k_vars),
        batch_vars_(ops.batch_vars),
        loop_batch_vars_(ops.batch_vars),
        m_(plan.m),
        n_(plan.n),
        k_(plan.k),
        mb_(plan.mb),
        nb_(plan.nb),
        tile_(plan.tile) {}

  ContractionSchedule Run() {
    ContractionSchedule out;
    std::vector<Stmt> stages;
    if (!plan_.a_in_place) a_buffer_ = PackOperand(/*is_a=*/true, out, stages);
    if (!plan_.b_in_place) b_buffer_ = PackOperand(/*is_a=*/false, out, stages);
    TileCode tile = BuildTile(stages);
    switch (plan_.loop_order) {
      case LoopOrder::kTilesInParallel:
        stages.push_back(TilesInParallel(tile));
        break;
      case LoopOrder::kCacheGroups:
        stages.push_back(AroundBatch(CacheGroupLoops(tile), tile));
        break;
      case LoopOrder::kBlocks:
        stages.push_back(AroundBatch(BlockLoops(tile), tile));
        break;
    }
    out.body = MakeSeq(std::move(stages));
    out.summary = plan_.Summary();
    if (prefetches_a_rows_) out.summary += " (A rows prefetched)";
    out.row_tiles = plan_.layout == ContractionPlan::Layout::kRowTiles;
    return out;
  }

 private:
  struct TileCode {
    std::vector<Stmt> stmts;
    Var jb, ib;
    Var kc;  // the K block loop's variable; null without K blocks
  };

  std::vector<Expr> Split(const Expr& flat, const std::vector<Var>& vars) {
    return SplitIndex(b_, flat, vars);
  }

  // Bytes of one element of buffer `id` as stored (a narrower storage type
  // for constants kept so), and how many share a cache line.
  int64_t ElementBytes(int id) const {
    return std::max<int64_t>(1, DTypeSize(StorageDTypeOf((*t_.buffers)[id])));
  }
  static int64_t LineElements(int64_t element_bytes) {
    return std::max<int64_t>(1, kCacheLineBytes / element_bytes);
  }

  bool StepsByOne(const Expr& index, const std::vector<Var>& vars, int64_t extent) {
    return lower::StepsByOne(b_, index, vars, extent);
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

    if (auto packed = PackConstant(f, batch, rows, blocks, width)) {
      packed = NarrowIntegerPanel(std::move(packed));
      BufferDecl& decl = (*t_.buffers)[f->buffer];
      decl.num_elements = elements;
      decl.name += ".packed";
      if (packed->type.dtype != DType::kFloat32) decl.storage = packed->type.dtype;
      out.packed_constants.emplace_back(f->buffer, std::move(packed));
      return f->buffer;
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
      const bool parallel = i == 0 && elements >= knobs_.parallel_work;
      body = MakeFor(loops[i], parallel ? ForKind::kParallel : ForKind::kSerial, body);
    }
    stages.push_back(body);
    return buffer;
  }

  // a * b for the tile's update. Where a is a scaled activation, x * s with s
  // the same for every tile row `r` (`br`) -- a fused prologue's channel
  // scale (fuse_prologue.cc), read in place under channel lanes -- the scale
  // moves to b: x * (s * b), one vector multiply per k and vector of the
  // tile row rather than a scalar multiply and broadcast per row. (On
  // mobilenet_v3's SE convs per row: 0-8% slower than the scale's own
  // kernel and the conv; see fuse_prologue.cc.)
  Expr TileProduct(const Expr& a, const Expr& b, const Var& r, const Var& br) {
    if (a->kind != ExprKind::kBinary || a->binary_op() != te::BinaryOp::kMul) return b_.Mul(a, b);
    auto per_row = [&](const Expr& e) {
      return DependsOn(e, r.get()) || (br && DependsOn(e, br.get()));
    };
    for (int i = 0; i < 2; ++i) {
      const Expr& x = a->operands[i];
      const Expr& s = a->operands[1 - i];
      if (per_row(x) && !per_row(s)) return b_.Mul(x, b_.Mul(s, b));
    }
    return b_.Mul(a, b);
  }

  // Whether `f`'s index steps by one element along `rows` flattened: its
  // digits then fold back into the flat row, so packing needs no digit tables
  // (a 1x1 conv's input over its pixels).
  // A fused prologue (fuse_prologue.cc) over such a load qualifies too when
  // its other loads index by no row variable.
  bool ContiguousAlong(const Expr& f, const std::vector<Var>& rows) {
    if (rows.size() <= 1) return false;
    if (f->kind == ExprKind::kLoad) return StepsByOne(f->operands[0], rows, Product(rows));
    int by_rows = 0;
    bool contiguous = true;
    std::unordered_set<const te::ExprNode*> seen;
    std::function<void(const Expr&)> visit = [&](const Expr& x) {
      if (!seen.insert(x.get()).second) return;
      if (x->kind == ExprKind::kReduce) contiguous = false;
      if (x->kind == ExprKind::kLoad) {
        const bool depends = std::any_of(rows.begin(), rows.end(), [&](const Var& v) {
          return DependsOn(x->operands[0], v.get());
        });
        if (depends) {
          ++by_rows;
          contiguous &= StepsByOne(x->operands[0], rows, Product(rows));
        }
      }
      for (const Expr& o : x->operands) visit(o);
    };
    visit(f);
    return contiguous && by_rows == 1;
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
  // index affine in the loop variables; null otherwise. With batch variables
  // (Winograd's 16 to 36 GEMMs, winograd_conv.cc) the panels of each batch element
  // follow each other, in the order the tile loops flatten `batch`.
  std::shared_ptr<const ConstantData> PackConstant(const Expr& f, const std::vector<Var>& batch,
                                                   const std::vector<Var>& rows, int64_t blocks,
                                                   int width) {
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
    const int64_t batches = Product(batch);
    std::vector<int64_t> batch_off = offsets(batch, batches);
    const int64_t source_elements = data->type.NumElements();
    const float* src = data->data<float>();
    // Element (row, k) reads constant + row_off[row] + k_off[k]: all inside
    // the source when the extremes are, checked once so the copy has no
    // branch. Outside, it is not a plain read after all.
    const auto [row_min, row_max] = std::minmax_element(row_off.begin(), row_off.end());
    const auto [k_min, k_max] = std::minmax_element(k_off.begin(), k_off.end());
    const auto [batch_min, batch_max] = std::minmax_element(batch_off.begin(), batch_off.end());
    if (form->constant + *batch_min + *row_min + *k_min < 0 ||
        form->constant + *batch_max + *row_max + *k_max >= source_elements) {
      return nullptr;
    }
    auto packed = std::make_shared<ConstantData>();
    const int64_t elements = batches * blocks * k_ * width;
    packed->type = batch.empty() ? TensorType{DType::kFloat32, {blocks, k_, width}}
                                 : TensorType{DType::kFloat32, {batches, blocks, k_, width}};
    // Aligned, so the model runs from this block itself (not a copy of it);
    // every element is written below, the last panel's idle lanes as zeros.
    packed->bytes = ConstantBytes::Aligned(static_cast<size_t>(elements) * sizeof(float));
    // A transpose in blocks of kKBlock k: each row's run of k is read a cache
    // line at a time while the panel's kKBlock rows being written stay in L1.
    // Element by element (lane innermost, a read per row's line) it was about
    // two thirds of resnet18's lowering time, on its 9 MiB weights.
    constexpr int64_t kKBlock = 16;
    float* dst = reinterpret_cast<float*>(packed->bytes.data());
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t lanes = std::clamp<int64_t>(extent - blk * width, 0, width);
        float* panel = dst + (bi * blocks + blk) * k_ * width;
        for (int64_t k0 = 0; k0 < k_; k0 += kKBlock) {
          const int64_t k1 = std::min(k_, k0 + kKBlock);
          for (int64_t lane = 0; lane < lanes; ++lane) {
            const float* row = src + form->constant + batch_off[bi] + row_off[blk * width + lane];
            for (int64_t k = k0; k < k1; ++k) panel[k * width + lane] = row[k_off[k]];
          }
        }
        for (int64_t k = 0; lanes < width && k < k_; ++k) {
          std::fill(panel + k * width + lanes, panel + (k + 1) * width, 0.0f);
        }
      }
    }
    return packed;
  }

  // The packed panel in int8 or int16 when every value is an integer those
  // hold: codegen converts each loaded vector to float32 exactly, so the
  // products and sums are the float32 ones, from a quarter or half of the
  // memory. Quantised weights are such integers (a QDQ conv's centered
  // weights, see onnx_quantized_converters.cc), and the layers whose weights
  // dwarf their activations stream them from memory: qdq_resnet18's
  // 512-channel 3x3 convs read 9.4 MB of float32 weights per call at batch 1.
  // A zero may lose its sign; the accumulator starts at +0, and +0 + -0 is
  // +0, so no sum can tell.
  static std::shared_ptr<const ConstantData> NarrowIntegerPanel(
      std::shared_ptr<const ConstantData> panel) {
    const float* v = panel->data<float>();
    const int64_t n = panel->type.NumElements();
    float low = 0, high = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!(std::nearbyint(v[i]) == v[i]) || std::fabs(v[i]) > 32768) return panel;
      low = std::min(low, v[i]);
      high = std::max(high, v[i]);
    }
    const DType to = low >= -128 && high <= 127       ? DType::kInt8
                     : low >= -32768 && high <= 32767 ? DType::kInt16
                                                      : DType::kFloat32;
    if (to == DType::kFloat32) return panel;
    auto narrow = std::make_shared<ConstantData>();
    narrow->type = TensorType{to, panel->type.shape};
    // Aligned (every element is written below): the model runs from it as it is.
    narrow->bytes = ConstantBytes::Aligned(static_cast<size_t>(n * DTypeSize(to)));
    if (to == DType::kInt8) {
      auto* dst = reinterpret_cast<int8_t*>(narrow->bytes.data());
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int8_t>(v[i]);
    } else {
      auto* dst = reinterpret_cast<int16_t*>(narrow->bytes.data());
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int16_t>(v[i]);
    }
    return narrow;
  }

  // A tile's statements, over column block jb and row block ib: the
  // accumulators' init, the K loops, between K blocks the partial sums, and
  // the epilogue's masked store.
  TileCode BuildTile(std::vector<Stmt>& stages) {
    const int mr = tile_.mr, nr = tile_.nr();
    Var jb = b_.NewVar("jb", nb_);
    Var ib = b_.NewVar("ib", mb_);
    Var r = b_.NewVar("r", mr);
    // A tile row is NV registers of kLanes: vectors wider than a register
    // (and not a power of two) legalise poorly.
    Var vv = b_.NewVar("vv", tile_.nv);
    Var lane = b_.NewVar("v", kLanes);
    Expr v_ref = b_.Add(b_.Mul(b_.Ref(vv), b_.Int(kLanes)), b_.Ref(lane));
    // Batch rows: the innermost batch variable `row_var` becomes blocks
    // `row_block` of plan_.batch_rows rows `br`, each with its own tile of
    // accumulators; a ragged last block recomputes the last row (reads
    // clamped) and stores only real ones.
    const int64_t rows = plan_.batch_rows;
    Var br, row_var, row_block;
    Expr row_of;
    if (rows > 1) {
      row_var = batch_vars_.back();
      row_block = b_.NewVar(row_var->name + "_block", CeilDiv(row_var->extent, rows));
      br = b_.NewVar("br", rows);
      loop_batch_vars_.back() = row_block;
      row_of = b_.Add(b_.Mul(b_.Ref(row_block), b_.Int(rows)), b_.Ref(br));
    }
    const int acc = static_cast<int>(t_.buffers->size());
    t_.buffers->push_back({"acc", te::ScalarType::kF32, rows * int64_t{mr} * nr, /*local=*/true});
    Expr acc_row = rows > 1 ? b_.Add(b_.Mul(b_.Ref(br), b_.Int(mr)), b_.Ref(r)) : b_.Ref(r);
    Expr acc_index = b_.Add(b_.Mul(acc_row, b_.Int(nr)), v_ref);
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
    Expr a = plan_.a_in_place ? b_.Substitute(fa_, m_vars_, Split(pixel, m_vars_))
                         : b_.Load(a_buffer_, te::ScalarType::kF32,
                                   {panel_index(a_batch_, ib, mr, b_.Ref(r))});
    Expr bv = plan_.b_in_place
                  ? b_.Substitute(fb_, n_vars_, Split(n, n_vars_))
                  : b_.Load(b_buffer_, te::ScalarType::kF32, {panel_index(b_batch_, jb, nr, v_ref)});

    auto tile_loop = [&](Stmt s) {
      Stmt tile =
          MakeFor(r, ForKind::kUnrolled,
                  MakeFor(vv, ForKind::kUnrolled, MakeFor(lane, ForKind::kVector, std::move(s))));
      return rows > 1 ? MakeFor(br, ForKind::kUnrolled, tile) : tile;
    };
    // K blocking (KBlockSpan): the outermost reduction variable becomes
    // kc * span + kci, kc a serial loop between the column and row blocks.
    const int64_t span = plan_.k_block_span;
    Var kc;
    std::vector<Var> k_loops = k_vars_;
    if (span > 0) {
      kc = b_.NewVar("kc", k_vars_[0]->extent / span);
      k_loops[0] = b_.NewVar("kci", span);
      Expr outer_k = b_.Add(b_.Mul(b_.Ref(kc), b_.Int(span)), b_.Ref(k_loops[0]));
      a = b_.Substitute(a, {k_vars_[0]}, {outer_k});
      bv = b_.Substitute(bv, {k_vars_[0]}, {outer_k});
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
    Stmt update =
        tile_loop(MakeStore(acc, acc_index, b_.Add(acc_value, TileProduct(a, bv, r, br))));
    if (std::optional<Stmt> ahead = PrefetchPanelAhead(panel_index(b_batch_, jb, nr, b_.Int(0)))) {
      update = MakeSeq({*ahead, update});
    }
    prefetches_a_rows_ = PrefetchesARows(a, k_loops);
    const size_t prefetch_level = PrefetchLevel(k_loops);
    for (size_t i = k_loops.size(); i-- > 0;) {
      if (i == prefetch_level && !prefetches_a_rows_) {
        const std::vector<Var> outer(k_loops.begin(), k_loops.begin() + i + 1);
        if (std::optional<Stmt> prefetch = PrefetchNextPanel(jb, ib, kc, outer)) {
          update = MakeSeq({*prefetch, update});
        }
      }
      update = MakeFor(k_loops[i], ForKind::kSerial, update);
    }
    if (prefetches_a_rows_) update = KLoopPrefetchingARows(update, a, r);

    // The epilogue: the output element with the reduction read from acc and
    // the output variables rebuilt from the tile position.
    std::vector<Var> from = m_vars_;
    std::vector<Expr> to = Split(m, m_vars_);
    std::vector<Expr> n_parts = Split(n, n_vars_);
    if (t_.channel_blocks && n_vars_.size() == 2 && n_vars_[1]->extent == kLanes) {
      // Channel blocks: vector vv of column block jb is block jb * NV + vv
      // (the last one repeated past the end, its stores masked).
      Expr block = b_.Add(b_.Mul(b_.Ref(jb), b_.Int(tile_.nv)), b_.Ref(vv));
      if (nb_ * nr != n_) block = b_.Min(block, b_.Int(n_vars_[0]->extent - 1));
      n_parts = {block, b_.Ref(lane)};
    }
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
    const bool ragged_rows = rows > 1 && row_var->extent % rows != 0;
    if (ragged_rows) conjoin(b_.Compare(te::CompareOp::kLT, row_of, b_.Int(row_var->extent)));
    Stmt store = tile_loop(MakeStore(t_.out_buffer, out_index, epilogue, predicate));

    std::vector<Stmt> tile = {init, update};
    if (span > 0) {
      tile.push_back(tile_loop(MakeStore(partial, partial_index, acc_value,
                                         b_.Unary(te::UnaryOp::kNot, last_block))));
    }
    tile.push_back(store);
    if (rows > 1) {
      const Expr row = ragged_rows ? b_.Min(row_of, b_.Int(row_var->extent - 1)) : row_of;
      for (Stmt& s : tile) {
        s = MapExprs(s, [&](const Expr& e) { return e ? b_.Substitute(e, {row_var}, {row}) : e; });
      }
    }
    return {std::move(tile), jb, ib, kc};
  }

  // A flat tile's B panel larger than L1 streams from L2 once per tile, NR
  // floats (4 lines at 6x64) per k step, which the hardware prefetcher left
  // behind: each k step asks for the lines kPanelAheadRows steps ahead into
  // L1, given `row` (the panel index of the step's first element). Intel
  // Xeon (48 KB L1d, 2 MB L2), 1 thread, min of 3-5 interleaved runs:
  // 512^3 1.42 -> 1.23 ms, 128x3072x768 3.15 -> 2.79, 960x2048x384 8.65 ->
  // 8.18, 1024^3 12.40 -> 12.13; 128x768x768 and 128x768x3072 unchanged.
  // Null where B is read in place, its panel fits L1 (K blocks keep one
  // block there) or the tile is not flat.
  std::optional<Stmt> PrefetchPanelAhead(const Expr& row) {
    constexpr int64_t kPanelAheadRows = 16;
    if (plan_.b_in_place || plan_.k_block_span > 0 || plan_.pixel_rows ||
        plan_.layout != ContractionPlan::Layout::kFlatTiles) {
      return std::nullopt;
    }
    const int64_t element_bytes = ElementBytes(b_buffer_);
    if (k_ * tile_.nr() * element_bytes <= knobs_.l1_bytes) return std::nullopt;
    const int64_t per_line = LineElements(element_bytes);
    Expr ahead = b_.Add(row, b_.Int(kPanelAheadRows * tile_.nr()));
    std::vector<Stmt> prefetches;
    for (int64_t e = 0; e < tile_.nr(); e += per_line) {
      prefetches.push_back(MakePrefetch(b_buffer_, b_.Add(ahead, b_.Int(e)), /*into_l1=*/true));
    }
    return MakeSeq(std::move(prefetches));
  }

  // Flat tiles reading a large A in place stream all of it once per column
  // block: MR rows at a time, each its own run of K, a line of every row
  // per 16 k steps. Once A outgrew L3's share the hardware prefetchers fell
  // behind, the more so with PrefetchNextPanel's requests for the next B
  // panel. On an AMD EPYC (Zen 5), against oneDNN in the same run: 1
  // thread, 2048^3 (16 MB of A) 0.88-0.99 with them, 0.99-1.01 without;
  // 4096x1024x1024 0.87-0.94 / 0.99. So the next panel is left to the
  // hardware and each line of k steps first prefetches every row's line
  // kARowAheadLines ahead into L2. 1 thread: 2048^3 0.97-0.99 -> 1.00-1.04,
  // 4096x1024x1024 0.93-0.96 -> 1.01-1.02, 1024x3072x768 (12 MB)
  // 1.01-1.03 -> 1.03-1.05; 2 threads, where the old schedule fell into
  // slow runs: 2048^3 0.86-0.99 -> 1.01-1.04, 4096x1024x1024 0.82-0.98 ->
  // 1.03-1.05. At 4 MB (1024^3, within L3) no change, so only beyond
  // a_row_prefetch_bytes. Not measured on an Intel Xeon.
  // Applies to flat tiles with A in place along its rows, one reduction
  // loop, K a whole number of lines.
  bool PrefetchesARows(const Expr& a, const std::vector<Var>& k_loops) const {
    if (!plan_.a_in_place || plan_.pixel_rows ||
        plan_.layout != ContractionPlan::Layout::kFlatTiles || k_loops.size() != 1 ||
        k_loops[0] != k_vars_[0] || a->kind != ExprKind::kLoad || a->operands.size() != 1 ||
        StrideAlong(a->operands[0], k_loops[0].get()) != 1) {
      return false;
    }
    const int64_t element_bytes = ElementBytes(a->buffer);
    return m_ * k_ * element_bytes > knobs_.a_row_prefetch_bytes &&
           k_ % LineElements(element_bytes) == 0;
  }

  // `k_loop` (over k_vars_[0]) as lines of steps, each line first
  // prefetching the line kARowAheadLines ahead in each of A's MR rows (`a`
  // at tile row `r`). The last lines' requests run into the next rows,
  // which the tile reads anyway.
  Stmt KLoopPrefetchingARows(const Stmt& k_loop, const Expr& a, const Var& r) {
    constexpr int64_t kARowAheadLines = 6;
    const Var& k = k_loop->var;
    const int64_t per_line = LineElements(ElementBytes(a->buffer));
    Var line = b_.NewVar("k_line", k->extent / per_line);
    Var step = b_.NewVar("k_step", per_line);
    Expr line_start = b_.Mul(b_.Ref(line), b_.Int(per_line));
    Expr ahead = b_.Add(line_start, b_.Int(kARowAheadLines * per_line));
    std::vector<Stmt> body;
    for (int row = 0; row < tile_.mr; ++row) {
      body.push_back(
          MakePrefetch(a->buffer, b_.Substitute(a->operands[0], {r, k}, {b_.Int(row), ahead})));
    }
    Expr k_of = b_.Add(line_start, b_.Ref(step));
    Stmt steps = MapExprs(k_loop->children[0],
                          [&](const Expr& e) { return e ? b_.Substitute(e, {k}, {k_of}) : e; });
    body.push_back(MakeFor(step, ForKind::kSerial, steps));
    return MakeFor(line, ForKind::kSerial, MakeSeq(std::move(body)));
  }

  // With plain blocks (jb, then K blocks, then every row block ib over the
  // same panel) only the first row block's pass reads B's panel from beyond
  // L2, at the pace of its multiply-adds, which outruns memory where the
  // panel is large and the row blocks few: resnet18's 7x7 convs (7 row
  // blocks, 110 KB panels per K block) ran at 44% of the FMA peak on an
  // Intel Xeon against 55-70% for the convs with more rows. So every pass
  // over a panel prefetches its share of the panel that follows it in
  // memory (the next K block's, or the next column block's after the last
  // K block): one pass's worth spread over all of them, a few lines per
  // step of the outermost reduction loop `k_outer`, into L2. The one
  // parallel loop over all tiles (no K blocks) visits a column block's row
  // tiles in turn too, so its passes prefetch the next column block's
  // panel (transformer 4.66-4.73 -> 4.50-4.52 ms, bert_base 156-158 -> 144
  // ms at 1 thread). Null where the panel is B read in place, under cache
  // groups (whose K block is shared by several column blocks), or with one
  // row block.
  // The reduction loop whose body prefetches: the outermost, except that
  // blocked channels (whose outermost loop steps a whole 3x3 window of 16
  // channels, one step per K block) go down to the loop whose steps are
  // enough units for at most kMaxPrefetchesPerUnit lines each, never the
  // innermost. A burst of 62 prefetches at the start of each tile of
  // resnet18's 512-channel 3x3 convs (whose 9.4 MB of weights stream from
  // memory at batch 1) left them at 2.25 ms against 1.8 for NCHW's channel
  // lanes, which spread 4 per step of their outer loop.
  size_t PrefetchLevel(const std::vector<Var>& k_loops) const {
    constexpr int64_t kMaxPrefetchesPerUnit = 4;
    if (!t_.channel_blocks || b_buffer_ < 0) return 0;
    const int64_t block_k = plan_.k_block_span > 0 ? k_ / (k_vars_[0]->extent /
                                                          plan_.k_block_span)
                                                   : k_;
    const int64_t lines = CeilDiv(block_k * tile_.nr() * 4, kCacheLineBytes);
    int64_t units = mb_;
    for (size_t i = 0; i + 1 < k_loops.size(); ++i) {
      units *= k_loops[i]->extent;
      if (CeilDiv(lines, units) <= kMaxPrefetchesPerUnit || i + 2 == k_loops.size()) return i;
    }
    return 0;
  }

  std::optional<Stmt> PrefetchNextPanel(const Var& jb, const Var& ib, const Var& kc,
                                        const std::vector<Var>& k_outer) {
    if (plan_.loop_order == LoopOrder::kCacheGroups || plan_.b_in_place || mb_ < 2) {
      return std::nullopt;
    }
    const int64_t block_k = kc ? k_ / kc->extent : k_;
    const int64_t block_elements = block_k * tile_.nr();
    const int64_t per_line = LineElements(ElementBytes(b_buffer_));
    const int64_t lines = CeilDiv(block_elements, per_line);
    if (lines * kCacheLineBytes < kMinPrefetchPanelBytes) return std::nullopt;
    int64_t units = mb_;
    Expr unit = b_.Ref(ib);
    for (const Var& v : k_outer) {
      units *= v->extent;
      unit = b_.Add(b_.Mul(unit, b_.Int(v->extent)), b_.Ref(v));
    }
    const int64_t per_unit = CeilDiv(lines, units);
    std::vector<Var> outer = b_batch_;
    outer.push_back(jb);
    Expr block_start = b_.Mul(Flat(outer), b_.Int(k_));
    if (kc) block_start = b_.Add(block_start, b_.Mul(b_.Ref(kc), b_.Int(block_k)));
    Expr next = b_.Mul(b_.Add(block_start, b_.Int(block_k)), b_.Int(tile_.nr()));
    std::vector<Stmt> prefetches;
    for (int64_t i = 0; i < per_unit; ++i) {
      Expr line = b_.Add(b_.Mul(unit, b_.Int(per_unit)), b_.Int(i));
      // More steps than lines: line `unit` would run past the next panel
      // into the ones after it, as far as units / lines panels ahead (42 at
      // 1024^3), pulling into L2 what is evicted before its use, and with
      // it the panel being read. Paced instead, a line per units / lines
      // steps. (bert's K = 3072 GEMM, 128x3072x768: 3.75 -> 3.30 ms.)
      if (units > lines) line = b_.Div(b_.Mul(unit, b_.Int(lines)), b_.Int(units));
      prefetches.push_back(MakePrefetch(b_buffer_, b_.Add(next, b_.Mul(line, b_.Int(per_line)))));
    }
    return MakeSeq(std::move(prefetches));
  }

  // The tile's statements at column block `jb_of` and row block `ib_of`
  // (for loops that reach the blocks through other variables).
  Stmt TileAt(TileCode& tile, const Expr& jb_of, const Expr& ib_of) {
    return MapExprs(MakeSeq(std::move(tile.stmts)), [&](const Expr& e) {
      return e ? b_.Substitute(e, {tile.jb, tile.ib}, {jb_of, ib_of}) : e;
    });
  }

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
  Stmt TilesInParallel(TileCode& tile) {
    const int64_t parts = plan_.pixel_parts;
    const int64_t per_part = CeilDiv(mb_, parts);
    Var t = b_.NewVar("tile", nb_ * per_part * parts);
    Expr part = b_.Div(b_.Ref(t), b_.Int(nb_ * per_part));
    Expr rest = b_.Mod(b_.Ref(t), b_.Int(nb_ * per_part));
    Expr jb_of = b_.Div(rest, b_.Int(per_part));
    Expr ib_of = b_.Add(b_.Mul(part, b_.Int(per_part)), b_.Mod(rest, b_.Int(per_part)));
    if (per_part * parts != mb_) ib_of = b_.Min(ib_of, b_.Int(mb_ - 1));
    // Images kept apart run in turn, each with all threads on its tiles.
    Stmt flat = MakeFor(t, ForKind::kParallel, TileAt(tile, jb_of, ib_of));
    for (size_t i = loop_batch_vars_.size(); i-- > 0;) {
      flat = MakeFor(loop_batch_vars_[i], ForKind::kSerial, flat);
    }
    return flat;
  }

  // jb = jg * G + jbi, ib = ig * R + ibi:  jg, ig, kc, jbi, ibi (the cache
  // groups of contraction_plan.cc).
  Stmt CacheGroupLoops(TileCode& tile) {
    const int64_t g = plan_.group_col_blocks, r = plan_.group_row_blocks;
    Var jg = b_.NewVar("jg", nb_ / g);
    Var jbi = b_.NewVar("jbi", g);
    Var ig = b_.NewVar("ig", mb_ / r);
    Var ibi = b_.NewVar("ibi", r);
    Expr jb_of = b_.Add(b_.Mul(b_.Ref(jg), b_.Int(g)), b_.Ref(jbi));
    Expr ib_of = b_.Add(b_.Mul(b_.Ref(ig), b_.Int(r)), b_.Ref(ibi));
    Stmt body = MakeFor(ibi, ForKind::kSerial, TileAt(tile, jb_of, ib_of));
    body = MakeFor(jbi, ForKind::kSerial, body);
    body = MakeFor(tile.kc, ForKind::kSerial, body);
    body = MakeFor(ig, ForKind::kSerial, body);
    return MakeFor(jg, ForKind::kSerial, body);
  }

  // jb, then the K blocks if any, then ib.
  Stmt BlockLoops(TileCode& tile) {
    Stmt body = MakeFor(tile.ib, ForKind::kSerial, MakeSeq(std::move(tile.stmts)));
    if (tile.kc) body = MakeFor(tile.kc, ForKind::kSerial, body);
    return MakeFor(tile.jb, ForKind::kSerial, body);
  }

  // `body` inside the batch loops, its outermost loop that may be parallel
  // made so.
  Stmt AroundBatch(Stmt body, const TileCode& tile) {
    for (size_t i = loop_batch_vars_.size(); i-- > 0;) {
      body = MakeFor(loop_batch_vars_[i], ForKind::kSerial, body);
    }
    if (plan_.parallel) {
      bool placed = false;
      body = MarkFirstParallel(body, tile.kc.get(), placed);
    }
    return body;
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
  const ContractionPlan& plan_;
  const ContractionKnobs& knobs_;
  const Expr value_, out_index_, store_predicate_;
  const Expr reduce_, fa_, fb_;
  const std::vector<Var> m_vars_, n_vars_, k_vars_, batch_vars_;
  // The batch loops around the tiles: batch_vars_, with batch rows the
  // innermost one's blocks instead of it.
  std::vector<Var> loop_batch_vars_;
  std::vector<Var> a_batch_, b_batch_;
  const int64_t m_, n_, k_, mb_, nb_;
  const Tile tile_;
  int a_buffer_ = -1, b_buffer_ = -1;
  bool prefetches_a_rows_ = false;  // KLoopPrefetchingARows applied
};

}  // namespace

int64_t Product(const std::vector<Var>& vars) {
  int64_t p = 1;
  for (const Var& v : vars) p *= v->extent;
  return p;
}

std::vector<Expr> SplitIndex(te::ExprBuilder& b, const Expr& flat, const std::vector<Var>& vars) {
  std::vector<Expr> parts(vars.size());
  Expr rest = flat;
  for (size_t i = vars.size(); i-- > 0;) {
    if (i == 0) {
      parts[i] = rest;
    } else {
      parts[i] = b.Mod(rest, b.Int(vars[i]->extent));
      rest = b.Div(rest, b.Int(vars[i]->extent));
    }
  }
  return parts;
}

bool StepsByOne(te::ExprBuilder& b, const Expr& index, const std::vector<Var>& vars,
                int64_t extent) {
  Var probe = b.NewVar("probe", extent);
  Expr at = b.Substitute(index, vars, SplitIndex(b, b.Ref(probe), vars));
  return StrideAlong(at, probe.get()) == 1;
}

ContractionSchedule EmitContraction(const ContractionTarget& target,
                                    const ContractionOperands& operands,
                                    const ContractionPlan& plan, const ContractionKnobs& knobs) {
  return Emitter(target, operands, plan, knobs).Run();
}

}  // namespace kiln::lower
