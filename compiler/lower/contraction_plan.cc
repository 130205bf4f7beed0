#include "compiler/lower/contraction_plan.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/int_math.h"

namespace kiln::lower {
namespace {

using Layout = ContractionPlan::Layout;
using LoopOrder = ContractionPlan::LoopOrder;

// Whether channel lanes keep the images apart, as a batch dimension run
// image by image, instead of joining them to the pixels: where the padded
// input of all images outgrows L2 and each image has pixels enough for
// tiles of its own. Lowering then copies each image's padded input just
// before its tiles (FillPerImage), so the tiles read it from L2 instead of
// from a copy of all images made up front. A small gain (resnet18 b8, 1
// thread, minimums of 5 runs: 164.6-172.3 ms against 166.4-177.3; 2
// threads unchanged): its 56x56 convs still take about 1.3x their batch-1
// time per image, which the copy did not explain.
bool ImagesApart(const ContractionShape& s, const ContractionKnobs& knobs) {
  if (!s.conv_input_has_slack || s.batch == 1) return false;
  return s.conv_input_bytes > knobs.images_apart_bytes && s.n >= knobs.images_apart_pixels;
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
// took Ap past 8 MB and 8 or more column blocks re-reading it.
// Those runs predate the unblocked tile loop's prefetch of the next
// column block's panel (contraction_emit.cc's PrefetchNextPanel, paced
// since 0.4.32): with it, unblocked tiles win on an Intel Xeon with 2 MB of
// L2 (1 thread, min of 4 interleaved runs): 2048^3 (16 MB of A) 117.7 ->
// 100.0 ms, 1024x3072x768 (bert_base's FFN output at b8, 12 MB) 30.4 ->
// 26.4. So the threshold is now 32 MB (not measured beyond 16). Blocks
// split the outermost reduction variable (conv's input channel) so inner
// window offsets stay affine, and must divide it exactly. The column
// blocks (with the batch) are also what the pool shares out: the K block
// loop itself is serial.
// With channel lanes the streamed operand is the other one: each row tile
// rereads the K x NR weight panel, so K blocks keep a block of it (32 KB,
// ContractionKnobs::lane_block_bytes) for all the row tiles once the
// panel passes 256 KB (with 128 KB blocks, resnet18's 7x7 convs went
// 1.78 -> 1.43 ms, 14x14: 1.61 -> 1.25, in one run).
int64_t KBlockSpan(const ContractionPlan& p, const ContractionKnobs& knobs) {
  const int nr = p.tile.nr();
  int64_t target = knobs.k_block_bytes / (nr * 4);
  if (p.pixel_rows) {
    // Nor for blocked channels in one column block (a wide tile over all
    // output channels): mobilenet_v3's 672 -> 112 channel 1x1 conv (14x14, a
    // 301 KB panel for 3x112 tiles) ran 0.135 ms without K blocks and
    // 0.151-0.157 with spans of 3, 6 or 14 channel blocks (AMD EPYC Zen 5, 1
    // thread). Every K-blocked blocked conv of the benchmark models has 8
    // column blocks or more.
    if (p.k * nr * 4 <= knobs.lane_panel_bytes || p.mb < 2) return 0;
    if (p.channel_blocks && p.nb < 2) return 0;
    target = knobs.lane_block_bytes / (nr * 4);
    // Blocked channels' outer reduction variable is a channel block, a
    // whole window of 16 channels per step (144 rows for 3x3): one step per
    // K block at least, or none would fit and layer3's 3x3 convs ran
    // without K blocks at 1.7 ms against 1.4 for NCHW's channel lanes.
    if (p.channel_blocks) target = std::max(target, p.k / p.k_outer);
  } else {
    if (p.mb * p.tile.mr * p.k * 4 <= knobs.k_block_ap_bytes) return 0;
    if (p.batch * p.nb < 8) return 0;
  }
  const int64_t span = LargestKBlockSpan(p, target);
  if (span == 0) return 0;
  const int64_t partial_bytes = p.batch * p.nb * p.mb * p.tile.mr * nr * 4;
  if (partial_bytes > knobs.max_partial_bytes) return 0;
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
// `kc_rows`: the reduction rows of one K block.
void ChooseCacheGroups(int64_t kc_rows, const ContractionKnobs& knobs, ContractionPlan& p) {
  p.group_col_blocks = p.group_row_blocks = 1;
  if (p.pixel_rows) return;
  const int64_t mr = p.tile.mr, nr = p.tile.nr();
  // At least two groups of columns, for the pool to share out.
  for (int64_t d = 1; d <= std::min(p.nb / 2, knobs.cache_group_column_blocks); ++d) {
    if (p.nb % d == 0) p.group_col_blocks = d;
  }
  for (int64_t d = 1; d <= p.mb; ++d) {
    const int64_t rows = d * mr;
    const int64_t bytes = rows * (p.group_col_blocks * nr + kc_rows) * 4;  // partial sums + Ap
    if (p.mb % d == 0 && bytes <= knobs.cache_group_bytes) p.group_row_blocks = d;
  }
}

// How many parts the flat tile loop splits the row blocks into: with
// channel lanes, enough for a thread's tiles to keep to its pixels at 2 or
// 4 threads, each part at least 2 tiles; otherwise 1 (the column blocks
// are the pixels already). Parts that divide the row blocks are preferred;
// otherwise the last part is padded by redoing its last tile, at most one
// tile in max_redone_tiles (7x7 outputs: 7 tiles stay whole). Requiring an
// exact division had left 28x28 outputs (131 tiles of 6 pixels) split by
// column blocks, so at 2 threads each thread read the whole input, half
// of it from the other core (resnet18 b8, 2 threads: its stride-2 3x3
// convs took 0.82-0.89x their earlier time with the parts).
int64_t PixelParts(const ContractionPlan& p, const ContractionKnobs& knobs) {
  if (!p.pixel_rows) return 1;
  for (int64_t parts : {4, 2}) {
    if (p.mb % parts == 0 && p.mb / parts >= 2) return parts;
  }
  for (int64_t parts : {4, 2}) {
    const int64_t redone = CeilDiv(p.mb, parts) * parts - p.mb;
    if (p.mb / parts >= 2 && redone * knobs.max_redone_tiles <= p.mb) return parts;
  }
  return 1;
}

}  // namespace

// On an AMD EPYC (Zen 5), kiln-bench, 1 thread: the transformer's M = 128
// GEMMs ran 2.5-4.5% faster forced to 8x32 than at the 6x64 a load cycle per
// operand chose (which pads 128 rows to 132), and `kiln tune` on resnet18
// wrote 7x32 and 8x32 records almost everywhere. With half a cycle, the
// nine benchmark models at b1 and b8, 1 and 2 threads (36 cells, kiln-bench
// p50, 3 alternating pairs each) ran at 0.94-1.02 of their one-cycle p50,
// median 0.98: regnet_y_400mf and googlenet b1 t1 0.94, resnet50 b1 t2
// 0.94, mobilenet_v2 b8 0.94-0.96; convnext_tiny and bert_base 0.99-1.01;
// the one cell above 1.01, mobilenet_v3_large b8 t2 (1.02), spread
// 0.96-1.03 over its pairs. Intel hosts keep one cycle (not measured here).
ContractionKnobs HostContractionKnobs() {
  ContractionKnobs knobs;
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd")) {
    knobs.operand_load_cycles = 0.5;
    knobs.blocked_channels_l2_bytes_per_cycle = 48;
  }
  return knobs;
}

bool TileIsLegal(int mr, int nv) {
  // Accumulators + B vectors in 32 registers. Up to seven vectors, so output
  // channels of five to seven vectors (80, 96, 112) fill whole tiles: at
  // nv <= 4 they were 7x16 tiles (one B load and seven broadcasts per seven
  // FMAs) or padded ones. On an AMD EPYC (Zen 5), 1 thread, mobilenet_v3's
  // 1x1 convs with 80 output channels went from 8x16 to 4x80 (K = 32) and
  // from 7x16 to 5x80 (K = 192-240), 70-80% -> 88-96% of the FMA peak.
  return mr >= 1 && mr <= kMaxTileRows && nv >= 1 && nv <= kMaxTileVectors && mr * nv + nv <= 30;
}

double TileCost(int mr, int nv, int64_t m, int64_t n, int64_t k, int64_t rows,
                double store_cycles, const ContractionKnobs& knobs) {
  // FMAs issue on two ports; the MR broadcasts and NV loads at
  // operand_load_cycles each (one on an Intel Xeon, half on AMD Zen:
  // HostContractionKnobs); four cycles of FMA latency per accumulator chain.
  double per_k = std::max({mr * nv / 2.0, (mr + nv) * knobs.operand_load_cycles, 4.0});
  // A K x NR panel of B beyond L1 streams from L2 once per tile, NV lines
  // a k step at l2_bytes_per_cycle, which wide-and-short tiles hit first.
  if (k * nv * kLanes * 4 > knobs.l1_bytes) {
    per_k = std::max(per_k, nv * 64 / knobs.l2_bytes_per_cycle);
  }
  const double tiles = static_cast<double>(CeilDiv(m, mr) * CeilDiv(n, nv * kLanes) * rows);
  return tiles * (k * per_k + mr * nv * store_cycles);
}

namespace {

// Among tiles of equal cost and padding: those of at most four vectors
// first (the ones measured longest: 4x96 against 7x48 and 8x48 ran the same
// on mobilenet_v2, and 1x112 GEMVs tie 1x48 in the estimate), then the
// larger tile (less loop overhead per multiply-add).
std::pair<bool, int> TieRank(int mr, int nv) { return {nv <= 4, mr * nv}; }

}  // namespace

// Ties go to the tile that pads less (zero rows still cost packing and
// stores), then by TieRank.
Tile ChooseTile(int64_t m, int64_t n, int64_t k, int64_t rows, double store_cycles,
                const ContractionKnobs& knobs, int max_vectors) {
  Tile best;
  int64_t best_area = 0;
  for (int mr = 1; mr <= kMaxTileRows; ++mr) {
    for (int nv = 1; nv <= max_vectors; ++nv) {
      if (!TileIsLegal(mr, nv)) continue;
      const double cost = TileCost(mr, nv, m, n, k, rows, store_cycles, knobs);
      const int64_t area = CeilDiv(m, mr) * mr * CeilDiv(n, nv * kLanes) * nv * kLanes;
      bool better = best.cost == 0 || cost < best.cost * 0.999;
      if (!better && cost <= best.cost * 1.001) {
        better =
            area < best_area || (area == best_area && TieRank(mr, nv) > TieRank(best.mr, best.nv));
      }
      if (better) {
        best = {mr, nv, cost};
        best_area = area;
      }
    }
  }
  return best;
}

namespace {

// The most vectors the estimate gives a tile of `layout`: tiles of five to
// seven vectors only where they were measured, flat tiles that store whole
// runs (blocked channels, GEMMs). Elsewhere the estimate keeps at most four:
// with a scatter's 24 cycles a vector its 1x112 flat tiles beat row tiles
// for depthwise convs, unmeasured. Overrides and the tuner take any legal
// tile in any layout.
int EstimatedMaxVectors(Layout layout, const ContractionShape& s) {
  constexpr int kMeasuredElsewhere = 4;
  return layout == Layout::kFlatTiles && !s.flat_store_scatters ? kMaxTileVectors
                                                                : kMeasuredElsewhere;
}

// The knobs flat tiles are costed with: over blocked channels, their own
// L2 rate (ContractionKnobs::blocked_channels_l2_bytes_per_cycle).
ContractionKnobs FlatTileKnobs(const ContractionShape& s, const ContractionKnobs& knobs) {
  ContractionKnobs flat = knobs;
  if (s.channel_blocks) flat.l2_bytes_per_cycle = knobs.blocked_channels_l2_bytes_per_cycle;
  return flat;
}

// The estimate's layout and tile (the design note's choice between flat
// tiles, row tiles and channel lanes).
ContractionPlan EstimatedLayout(const ContractionShape& s, const ContractionKnobs& knobs) {
  ContractionPlan p;  // flat tiles over the shape as read, until a layout wins
  std::tie(p.m, p.n, p.k, p.batch, p.k_outer) = std::tie(s.m, s.n, s.k, s.batch, s.k_outer);
  p.inner_batch = s.inner_batch;
  p.channel_blocks = s.channel_blocks;
  p.tile = ChooseTile(s.m, s.n, s.k, 1,
                      s.flat_store_scatters ? knobs.scatter_cycles : knobs.store_cycles,
                      FlatTileKnobs(s, knobs), EstimatedMaxVectors(Layout::kFlatTiles, s));

  // Channel lanes (the design note), planned on the flat classification.
  bool lanes = false, lanes_apart = false;
  Tile lanes_tile;
  const ContractionShape::Lanes* lanes_shape = nullptr;
  if (s.channel_lanes_apply) {
    lanes_apart = ImagesApart(s, knobs);
    lanes_shape = lanes_apart ? &s.lanes_apart : &s.lanes_joined;
    if (lanes_shape->applies) {
      lanes = true;
      lanes_tile = ChooseTile(lanes_shape->pixels, s.m, s.k, lanes_shape->batch,
                              knobs.transposed_store_cycles, knobs,
                              EstimatedMaxVectors(Layout::kChannelLanes, s));
    }
  }
  // Row tiles: N is only the innermost N dimension and the outer ones become
  // loops around the tiles, so a tile row is one contiguous run of an output
  // row (a masked store, no scatter) at the price of padding each row to
  // whole tiles. Taken when B is read in place along that row and the
  // estimate beats the flat tiles -- always for depthwise convs, where K = 9
  // multiply-adds per output cannot hide a scatter.
  if (s.flat_store_scatters && s.row_tiles_apply) {
    const int64_t rows = s.n / s.n_inner;
    const Tile row = ChooseTile(s.m, s.n_inner, s.k, rows, knobs.store_cycles, knobs,
                                EstimatedMaxVectors(Layout::kRowTiles, s));
    if (row.cost < p.tile.cost) {
      p.layout = Layout::kRowTiles;
      p.batch = s.batch * rows;
      p.n = s.n_inner;
      p.tile = row;
      p.inner_batch = s.inner_batch_row_tiles;
    }
  }
  // The same for flat tiles that store whole runs (a 1x1 conv's output is
  // contiguous along the pixels): resnet50's 1x1 convs at batch 8 (12.8 MB
  // outputs) took 2-2.5x their batch-1 time per image with channel lanes;
  // flat tiles: 30.0-30.7 -> 11.4-12.1 ms for its 28x28 512-channel one, the
  // model 532-539 -> 487-504 ms (Intel Xeon, 1 thread).
  const int64_t output_bytes = s.m * s.n * s.batch * 4;
  if (lanes && (p.layout == Layout::kRowTiles || !s.flat_store_scatters) &&
      output_bytes > knobs.lanes_store_cache_bytes) {
    lanes = false;
  }
  // Tile costs are per batch element; the channel lanes' cover the batch.
  if (lanes && lanes_tile.cost < p.tile.cost * s.batch) {
    p.layout = Layout::kChannelLanes;
    p.n = s.m;
    p.m = lanes_shape->pixels;
    p.batch = lanes_shape->batch;
    p.tile = lanes_tile;
    p.images_apart = lanes_apart;
    p.inner_batch = 1;
  }
  return p;
}

// `layout` with the tile `o` names (or the estimate's best for that layout);
// an empty reason, or why the layout or tile does not fit the shape.
std::string ForcedLayout(const ContractionShape& s, const ContractionKnobs& knobs,
                         ContractionLayout layout, const ScheduleOverride& o,
                         ContractionPlan& p) {
  if ((o.mr > 0 || o.nv > 0) && !TileIsLegal(o.mr, o.nv)) {
    return absl::StrCat("tile ", o.mr, "x", o.nv * kLanes, " does not fit the registers");
  }
  p = ContractionPlan();
  std::tie(p.m, p.n, p.k, p.batch, p.k_outer) = std::tie(s.m, s.n, s.k, s.batch, s.k_outer);
  p.channel_blocks = s.channel_blocks;
  p.layout = layout;
  p.inner_batch = s.inner_batch;
  int64_t rows = 1;
  double store_cycles = s.flat_store_scatters ? knobs.scatter_cycles : knobs.store_cycles;
  ContractionKnobs cost_knobs = knobs;
  switch (layout) {
    case Layout::kFlatTiles:
      cost_knobs = FlatTileKnobs(s, knobs);
      break;
    case Layout::kRowTiles:
      if (!s.flat_store_scatters || !s.row_tiles_apply) {
        return "row tiles apply only to a conv read in place over padded rows";
      }
      rows = s.n / s.n_inner;
      p.batch = s.batch * rows;
      p.n = s.n_inner;
      p.inner_batch = s.inner_batch_row_tiles;
      store_cycles = knobs.store_cycles;
      break;
    case Layout::kChannelLanes: {
      const bool apart = ImagesApart(s, knobs);
      const ContractionShape::Lanes& lanes = apart ? s.lanes_apart : s.lanes_joined;
      if (!s.channel_lanes_apply || !lanes.applies) {
        return "channel lanes apply only to a conv with constant weights read in place";
      }
      p.n = s.m;
      p.m = lanes.pixels;
      p.batch = lanes.batch;
      p.images_apart = apart;
      p.inner_batch = 1;
      rows = lanes.batch;
      store_cycles = knobs.transposed_store_cycles;
      break;
    }
  }
  if (o.mr > 0) {
    p.tile = {o.mr, o.nv, TileCost(o.mr, o.nv, p.m, p.n, p.k, rows, store_cycles, cost_knobs)};
  } else {
    p.tile =
        ChooseTile(p.m, p.n, p.k, rows, store_cycles, cost_knobs, EstimatedMaxVectors(layout, s));
  }
  return "";
}

// Batch rows for a plan whose tile is one row (M = 1: depthwise convs,
// GEMVs per batch element) under plain blocks without K blocks: as many
// values of the innermost batch variable as keep at most
// kBatchRowAccumulators accumulator registers (and at most 8 rows), the
// count between half that and all of it which computes the fewest rows
// once the last block is rounded up (the larger on a tie). A depthwise 3x3
// conv's output row then takes 9 multiply-adds in each of R independent
// chains instead of one chain of 9 dependent ones (4 cycles each): on an
// Intel Xeon its 14x14 and 28x28 layers ran at 5-20% of the FMA peak.
int64_t BatchRows(const ContractionPlan& p) {
  constexpr int64_t kBatchRowAccumulators = 12;
  if (p.m != 1 || p.tile.mr != 1 || p.layout == Layout::kChannelLanes ||
      p.loop_order != LoopOrder::kBlocks || p.k_block_span > 0 || p.inner_batch < 2) {
    return 1;
  }
  const int64_t most = std::min<int64_t>({8, kBatchRowAccumulators / p.tile.nv, p.inner_batch});
  if (most < 2) return 1;
  int64_t best = 1, best_rows = 0;
  for (int64_t r = std::max<int64_t>(2, most / 2); r <= most; ++r) {
    const int64_t computed = CeilDiv(p.inner_batch, r) * r;
    if (best == 1 || computed <= best_rows) {
      best = r;
      best_rows = computed;
    }
  }
  return best;
}

// Blocks, K blocks, loop order and parallelism for the plan's layout and
// tile, with `o`'s K blocks and parts where it sets them; an empty reason,
// or why they do not fit.
std::string FinishPlan(const ContractionKnobs& knobs, const ScheduleOverride& o,
                       ContractionPlan& p) {
  p.mb = CeilDiv(p.m, p.tile.mr);
  p.nb = CeilDiv(p.n, p.tile.nr());
  p.pixel_rows = p.layout == Layout::kChannelLanes || (p.channel_blocks &&
                                                       p.layout == Layout::kFlatTiles);
  p.k_block_span = KBlockSpan(p, knobs);
  if (o.k_block_span > 0) {
    const int64_t partial_bytes = p.batch * p.nb * p.mb * p.tile.mr * p.tile.nr() * 4;
    if (p.k_outer % o.k_block_span != 0 || o.k_block_span >= p.k_outer) {
      return absl::StrCat("K blocks of ", o.k_block_span, " do not divide the outer ",
                          "reduction extent ", p.k_outer, " into two or more");
    }
    if (partial_bytes > knobs.max_partial_bytes) {
      return absl::StrCat("K blocks would keep ", partial_bytes, " bytes of partial sums");
    }
  }
  if (o.k_block_span >= 0) p.k_block_span = o.k_block_span;
  p.parallel = p.m * p.n * p.k * p.batch >= knobs.parallel_work;
  // One parallel loop over all tiles where nothing else must order them:
  // the pool's contiguous chunks then balance to a tile (see
  // contraction_emit.cc's TilesInParallel).
  if (p.parallel && (p.batch == 1 || p.images_apart) && p.k_block_span == 0 && p.nb * p.mb > 1) {
    p.loop_order = LoopOrder::kTilesInParallel;
    p.pixel_parts = PixelParts(p, knobs);
    if (o.pixel_parts > 0) {
      if (!p.pixel_rows && o.pixel_parts != 1) {
        return "pixel parts apply only to channel lanes";
      }
      if (o.pixel_parts > p.mb) {
        return absl::StrCat(o.pixel_parts, " pixel parts exceed the ", p.mb, " row blocks");
      }
      p.pixel_parts = o.pixel_parts;
    }
    return "";
  }
  if (o.pixel_parts > 1) return "pixel parts apply only to one parallel loop over the tiles";
  if (p.k_block_span > 0) ChooseCacheGroups(p.k_block_span * (p.k / p.k_outer), knobs, p);
  p.loop_order = p.group_col_blocks > 1 || p.group_row_blocks > 1 ? LoopOrder::kCacheGroups
                                                                    : LoopOrder::kBlocks;
  p.batch_rows = BatchRows(p);
  return "";
}

}  // namespace

ContractionPlan PlanContraction(const ContractionShape& s, const ContractionKnobs& knobs,
                                const ScheduleOverride* override, std::string* ignored) {
  ContractionPlan estimated = EstimatedLayout(s, knobs);
  if (override != nullptr && !override->empty()) {
    ContractionPlan p = estimated;
    std::string reason;
    if (override->layout || override->mr > 0 || override->nv > 0) {
      reason = ForcedLayout(s, knobs, override->layout.value_or(estimated.layout), *override, p);
    }
    if (reason.empty()) reason = FinishPlan(knobs, *override, p);
    if (reason.empty()) return p;
    if (ignored != nullptr) *ignored = reason;
  }
  FinishPlan(knobs, ScheduleOverride(), estimated);  // refuses only an override's choices
  return estimated;
}

int64_t LargestKBlockSpan(const ContractionPlan& p, int64_t target_rows) {
  const int64_t inner = p.k / p.k_outer;
  int64_t span = 0;
  for (int64_t d = 1; d < p.k_outer; ++d) {
    if (p.k_outer % d == 0 && d * inner <= target_rows) span = d;
  }
  return span * inner * 2 >= target_rows ? span : 0;
}

ScheduleOverride OverrideOf(const ContractionPlan& p) {
  ScheduleOverride o;
  o.layout = p.layout;
  o.mr = p.tile.mr;
  o.nv = p.tile.nv;
  o.k_block_span = p.k_block_span;
  o.pixel_parts = p.pixel_parts;
  return o;
}

void ChooseOperandAccess(const OperandFacts& facts, ContractionPlan& p) {
  // Where the reduction runs in K blocks, packed panels were measured (the
  // cache groups); A in place there gave mixed results at 2048^3.
  // Channel blocks broadcast their pixels in place in K blocks too, as
  // channel lanes do.
  p.a_in_place = p.layout == Layout::kChannelLanes ||
                 (facts.a_broadcastable && (p.k_block_span == 0 || p.pixel_rows));
  const bool exact = p.nb * p.tile.nr() == p.n;
  p.b_in_place = facts.b_plain_activation_load && (facts.b_may_overrun || exact) &&
                 facts.b_steps_by_one;
}

std::string ContractionPlan::Summary() const {
  std::string cache_groups;
  if (loop_order == LoopOrder::kCacheGroups) {
    cache_groups = absl::StrCat(" (cache groups ", group_col_blocks, "x", group_row_blocks, ")");
  }
  return absl::StrCat("gemm ", tile.mr, "x", tile.nr(), " M=", m, " N=", n, " K=", k,
                      " batch=", batch, layout == Layout::kRowTiles ? " (row tiles)" : "",
                      layout == Layout::kChannelLanes ? " (channel lanes)" : "",
                      channel_blocks ? " (channel blocks)" : "",
                      k_block_span > 0 ? " (K blocks)" : "", cache_groups,
                      batch_rows > 1 ? absl::StrCat(" (batch rows ", batch_rows, ")") : "");
}

}  // namespace kiln::lower
