// The decisions of the contraction schedule, as data: which layout (flat
// tiles, row tiles, channel lanes), which register tile, whether the
// reduction runs in K blocks and columns in cache groups, how the tiles are
// shared among threads, and which operands are read in place. Chosen from
// a ContractionShape (numbers and yes/no facts the analysis reads off the
// expression in contraction_schedule.cc) by pure functions, so they can be
// tested, printed and, later, enumerated and timed by a tuner without
// building a loop nest. contraction_emit.cc builds the loops a plan says.
#ifndef KILN_COMPILER_LOWER_CONTRACTION_PLAN_H_
#define KILN_COMPILER_LOWER_CONTRACTION_PLAN_H_

#include <cstdint>
#include <string>

#include "compiler/lower/schedule_override.h"

namespace kiln::lower {

inline constexpr int kLanes = 16;  // float32 lanes of a 512-bit vector
// The most rows and vectors a register tile may have (TileIsLegal).
inline constexpr int kMaxTileRows = 8;
inline constexpr int kMaxTileVectors = 7;

// Every tunable number of the schedule, in one place. The defaults are what
// was measured (see each field); a tuner may plan with others.
struct ContractionKnobs {
  // Work (multiply-adds) above which a loop goes parallel, and below which
  // the generic loop nest is as good as tiling.
  int64_t parallel_work = 1 << 15;
  int64_t min_work = 1 << 14;
  // Cycles an epilogue spends per output vector: a contiguous masked store,
  // or a scatter through per-lane row digits (two 8-lane scatters with
  // their 64-bit index arithmetic).
  double store_cycles = 1;
  double scatter_cycles = 24;
  // A channel-lanes tile's store, per output vector: codegen transposes the
  // tile in registers and stores each channel's pixels with one masked store
  // (transpose_rows.h): 32 shuffles and 16 masked stores per 16 channels of
  // up to 8 pixels. An estimate, not a measurement; with it the stem and the
  // 14x14 pointwise convs chose channel lanes and ran 4-30% faster.
  double transposed_store_cycles = 3;
  int64_t l1_bytes = 32 << 10;
  // Bytes a cycle a tile's B panel beyond L1 streams from L2 at (TileCost):
  // 24 on an Intel Xeon, where 4x64 tiles hit it first. Flat tiles over
  // blocked channels take their own figure: 48 on AMD processors
  // (HostContractionKnobs), whose L2 moves 64 bytes a cycle to L1. On an
  // AMD EPYC (Zen 5), 1 thread, a 3x112 tile there over a 215 KB panel (448
  // bytes a k step) ran at 84% of the FMA peak, so at 36 bytes a cycle or
  // more, and the 8x32 and 7x32 tiles that the charge had preferred to 4x64
  // ran the same as 4x64 (resnet50, googlenet: 35 and 20 convs, sums of
  // per-kernel minimums 0.99x; mobilenet_v2's four 14x14 ones 1.03x). Other
  // GEMMs keep 24: transformer's M = 128 ones at 4x64 instead of 8x32 made
  // the model 2-3% slower.
  double l2_bytes_per_cycle = 24;
  double blocked_channels_l2_bytes_per_cycle = 24;
  // Cycles per broadcast of A or load of B in a tile's k step (TileCost):
  // on an Intel Xeon they issue as if on one port (8x32 tiles ran 10-15%
  // slower than 6x64 at equal FMAs per cycle in theory); AMD Zen 5 issues
  // two a cycle, and there narrower, taller tiles won (HostContractionKnobs).
  double operand_load_cycles = 1.0;
  // K blocks (KBlockSpan): the packed A size from which they pay, the B
  // block one keeps in L1, and the most partial-sum memory they may take.
  int64_t k_block_ap_bytes = int64_t{32} << 20;
  int64_t k_block_bytes = 24 << 10;
  int64_t max_partial_bytes = int64_t{64} << 20;
  // The A read in place from which flat tiles prefetch its rows ahead
  // (contraction_emit.cc's KLoopPrefetchingARows).
  int64_t a_row_prefetch_bytes = 4 << 20;
  // Channel lanes' K blocks: the weight panel size from which they pay, and
  // the block of it one K block keeps for all the row tiles: 32 KB, in L1
  // (128 KB in L2 before; on an Intel Xeon, A/B in one run, resnet18's 7x7
  // convs 1.81-1.88 -> 1.68-1.77 ms, the 14x14 and 28x28 ones 1-5% faster;
  // blocking the 64-channel 56x56 convs' 147 KB panels too made them 35%
  // slower, so the 256 KB threshold stays).
  int64_t lane_panel_bytes = 256 << 10;
  int64_t lane_block_bytes = 32 << 10;
  // Cache groups (ChooseCacheGroups): column blocks per group, and the L2
  // bytes a group's partial sums and K block of Ap may take.
  int64_t cache_group_column_blocks = 8;
  int64_t cache_group_bytes = 512 << 10;
  // PixelParts: row blocks per tile a ragged split may redo, at most.
  int64_t max_redone_tiles = 32;
  // Channel lanes store a tile as one short run per channel (6 pixels of 64
  // channel planes), row tiles as whole output rows. Once the output is
  // larger than the caches hold, those short runs, each a partial line that
  // must first be read, ran at memory latency: resnet18's stem at batch 2-8
  // took 2.6 ms per image with channel lanes against 1.4 at batch 1, and
  // 1.55 with row tiles. Beyond this size row tiles are kept where they
  // apply, and so are flat tiles where they store whole runs (1x1 convs);
  // flat tiles that scatter (convs over padded rows) lost to channel lanes
  // at any size.
  int64_t lanes_store_cache_bytes = 4 << 20;
  // ImagesApart: the padded input size (all images) above which, and the
  // pixels per image from which, channel lanes run image by image.
  int64_t images_apart_bytes = 1 << 20;
  int64_t images_apart_pixels = 256;
};

// An MR x NR register tile (NR = NV vectors of kLanes).
struct Tile {
  int mr = 1;
  int nv = 1;
  double cost = 0;  // estimated cycles, from ChooseTile
  int nr() const { return nv * kLanes; }
};

// The knobs for the CPU compiling (and so running) the kernels: the
// defaults, with operand_load_cycles at 0.5 and
// blocked_channels_l2_bytes_per_cycle at 48 on AMD processors.
ContractionKnobs HostContractionKnobs();

// Whether an MR x (NV * kLanes) tile fits the micro-kernel's registers:
// MR <= kMaxTileRows, NV <= kMaxTileVectors, MR * NV accumulators and NV B
// vectors in 30 of the 32.
bool TileIsLegal(int mr, int nv);

// The estimated cycles of `rows` independent M x N x K products in MR x NR
// tiles, epilogue included (`store_cycles` per output vector).
double TileCost(int mr, int nv, int64_t m, int64_t n, int64_t k, int64_t rows,
                double store_cycles, const ContractionKnobs& knobs = {});

// The tile with the fewest estimated cycles (TileCost) among the legal ones
// of at most `max_vectors` vectors.
Tile ChooseTile(int64_t m, int64_t n, int64_t k, int64_t rows, double store_cycles,
                const ContractionKnobs& knobs = {}, int max_vectors = kMaxTileVectors);

// What the plan is chosen from, read off the contraction's expression as a
// GEMM (the design note in contraction_schedule.cc).
struct ContractionShape {
  // Per batch element; batch is the product of the batch dimensions.
  int64_t m = 1, n = 1, k = 1, batch = 1;
  // The extent of the outermost reduction variable (K blocks split it).
  int64_t k_outer = 1;
  // Whether flat tiles would store through per-lane digits (the output is
  // not contiguous along the flattened N: a conv over padded rows).
  bool flat_store_scatters = false;
  // Row tiles apply: B is read in place along the innermost N dimension, and
  // the output is contiguous along it; that dimension's extent.
  bool row_tiles_apply = false;
  int64_t n_inner = 1;
  // Channel lanes (lanes over output channels, pixels over tile rows) apply,
  // with their pixels and batch when the images join the pixels or stay
  // apart (ImagesApart); `applies` false where the store predicate does not
  // fold into the pixels.
  struct Lanes {
    bool applies = false;
    int64_t pixels = 1, batch = 1;
  };
  bool channel_lanes_apply = false;
  Lanes lanes_joined, lanes_apart;
  // The conv input read in place has slack past its end (a padded copy),
  // and its size in bytes (ImagesApart).
  bool conv_input_has_slack = false;
  int64_t conv_input_bytes = 0;
  // The output's channels are blocked (ContractionTarget::channel_blocks):
  // flat tiles whose rows are pixels and columns output channels, as with
  // channel lanes but stored without a transpose.
  bool channel_blocks = false;
  // The extent of the innermost batch variable under flat tiles, and under
  // row tiles (the output row, once the outer N dims join the batch); 1
  // where there is none. Batch rows tile along it.
  int64_t inner_batch = 1, inner_batch_row_tiles = 1;
};

struct ContractionPlan {
  using Layout = ContractionLayout;
  // How the tile loops nest: every tile in one parallel loop; column and row
  // blocks in cache groups around the K blocks; or plain blocks.
  enum class LoopOrder { kTilesInParallel, kCacheGroups, kBlocks };
  Layout layout = Layout::kFlatTiles;
  LoopOrder loop_order = LoopOrder::kBlocks;
  Tile tile;
  // The GEMM under the layout (channel lanes swap the roles of M and N;
  // row tiles move N's outer dims into the batch).
  int64_t m = 1, n = 1, k = 1, batch = 1, k_outer = 1;
  int64_t mb = 1, nb = 1;  // row and column blocks of tiles
  bool images_apart = false;
  // Tile rows are pixels and columns output channels (channel lanes, or
  // flat tiles over blocked channels): K blocks, parts and operand access
  // then follow the channel lanes' rules.
  bool pixel_rows = false;
  bool channel_blocks = false;  // ContractionShape::channel_blocks
  // Values of the outermost reduction variable one K block spans; 0 for none.
  int64_t k_block_span = 0;
  // Cache groups: column and row blocks per group (kCacheGroups).
  int64_t group_col_blocks = 1, group_row_blocks = 1;
  // Parts the row blocks split into in the parallel tile loop.
  int64_t pixel_parts = 1;
  // Batch rows (BatchRows): where M is 1, a tile spans this many values of
  // the innermost batch variable (extent `inner_batch`), each its own
  // accumulators, so the multiply-adds of a depthwise conv's short rows run
  // as independent chains instead of one chain of K dependent ones.
  int64_t batch_rows = 1, inner_batch = 1;
  bool parallel = false;
  // Operands the micro-kernel reads in place rather than from packed panels.
  bool a_in_place = false, b_in_place = false;

  // "gemm MRxNR M=.. N=.. K=.. batch=.." and the layout's notes, as in IR
  // dumps and compile reports.
  std::string Summary() const;
};

// Layout, tile, blocks, K blocks, loop order and parallelism for `shape`.
// Operand access is decided after the layout is applied (ChooseOperandAccess).
// A non-null `override` replaces the estimate's choices where it sets them;
// one that does not fit the shape is ignored whole (the plan is the
// estimate's) and `ignored`, if given, says why.
ContractionPlan PlanContraction(const ContractionShape& shape,
                                const ContractionKnobs& knobs = {},
                                const ScheduleOverride* override = nullptr,
                                std::string* ignored = nullptr);

// The override that reproduces `plan` exactly: every field set.
ScheduleOverride OverrideOf(const ContractionPlan& plan);

// The largest K block span (a divisor of the outer reduction extent, below
// it) whose block has at most `target_rows` reduction rows, or 0 where that
// block would be shorter than half the target: too short to pay for its
// partial sums. The estimate adds its size thresholds; the tuner's
// candidates try it where the estimate chose no K blocks.
int64_t LargestKBlockSpan(const ContractionPlan& plan, int64_t target_rows);

// What decides whether operands are read in place, once the plan's layout
// and tile are known.
struct OperandFacts {
  // A is a load of an activation stepping by one along the innermost
  // reduction variable (each tile row streams one contiguous run).
  bool a_broadcastable = false;
  // B is a plain load of an activation whose index steps by one along N
  // (over N + NR values), and whether a tile may overrun its end.
  bool b_plain_activation_load = false;
  bool b_steps_by_one = false;
  bool b_may_overrun = false;
};
void ChooseOperandAccess(const OperandFacts& facts, ContractionPlan& plan);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_CONTRACTION_PLAN_H_
