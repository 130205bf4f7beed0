// conv2d_nchwc_depthwise and conv2d_nchwc_grouped as register tiles.
//
// Design note
// -----------
// In NCHW16c a depthwise conv's output vector (16 channels of one pixel)
// is a sum over the window of input vectors (the same 16 channels of one
// window pixel, a whole line) times weight vectors (C/16, KH, KW, 16): no
// broadcast, no transposition, one FMA per tap and vector. It is not a
// GEMM (every lane has its own weights), so it skips the contraction
// schedule for a tile of T pixels along an output row:
//
//     parallel for (n, cb):                       one plane of 16 channels (+ rows, below)
//       for oh:  for each tile of T pixels along ow:
//         acc[0..T) = 0                                  T vector registers
//         for ky:  for kx (unrolled):  w = weight[cb][ky][kx][:]
//           for r < T (unrolled):  acc[r] += in[oh*s+ky-pt][(ow0+r)*s+kx-pl][:] * w
//         out[oh][ow0 + r] = epilogue(acc[r] + bias)    (masked past OW)
//
// The T accumulators are independent chains, so the FMAs of one tap issue
// back to back instead of waiting on each other's latency (one pixel at a
// time, what the generic loop nest did, ran at 8% of the FMA peak). T is
// the largest width in [4, 8] dividing OW (7 for 7x7 to 28x28 outputs),
// else 8 with a ragged last tile whose reads are clamped.
//
// conv2d_nchwc_grouped (groups of w < 16 channels within a block, RegNet's
// w = 8) is the same loop nest with one more unrolled loop, over j < w,
// inside the taps: output lane k reads input lane k / w * w + j, times
// weight[cb][ky][kx][j][k]. The emitter loads each pixel's input line once
// per tap and permutes it per j (LLVM emits vpermilps + vpermpd at w = 8,
// vpermilps alone at 4), so a tap costs w FMAs per pixel where the
// block-diagonal GEMM did 16 with zeros (ConvertLayoutNchwc's note has the
// measurements: RegNet's grouped convs 1.44-1.49 -> 1.10-1.14 ms at batch 1).
//
// Few planes (a 16- to 48-channel layer at batch 1: 1 to 3 planes) would
// leave a thread idle or unevenly loaded, so the parallel loop then runs
// over (plane, chunk of interior rows) instead, with the border rows and
// the rows past the last whole chunk (chunk sizes chosen to leave few)
// serially around it (RowChunks, ChunkRows). On an AMD EPYC (Zen 5, 2
// cores), kernel medians over 5 alternating rounds in a quiet spell, 2
// threads: mobilenet_v3_large's 16-channel 112x112 conv (1 plane) 0.0222 ->
// 0.0147 ms, mobilenet_v2's 32-channel one (2 planes) 0.0260 -> 0.0260; at 1
// thread 0.0226 -> 0.0230-0.0239 and 0.047 -> 0.046. The models' p50 moved
// within noise (1.48 ms and 1.57 ms at batch 1, 2 threads).
//
// Padding: the input is read in place, never copied. The rows and tiles
// whose windows stay inside the input (all but the first and last few) read
// plain loads; the border ones check each tap's row or column and read a
// zero outside (3 row ranges x 3 tile ranges, each its own loop). A padded
// copy of each plane, as the NCHW convs make, had cost mobilenet_v2's
// stride-2 conv over 112x112x96 a pass of 5 MB through memory: 0.71 ms
// against 0.40 for the NCHW conv.
//
// Measured on an Intel Xeon (AVX-512, 2 cores shared with other jobs),
// mobilenet_v2 b1, 1 thread, per-kernel medians with their ReLU6, NCHW
// (contraction schedule, row tiles, padded per channel) -> blocked:
//     3x3, 32 ch, 112x112          0.217 -> 0.146 ms
//     3x3/2, 96 ch, 112 -> 56      0.402 -> 0.241
//     3x3, 144 ch, 56x56           0.191 -> 0.119
//     3x3, 576 ch, 14x14           0.087 -> 0.020
//     3x3, 960 ch, 7x7             0.069 -> 0.017-0.018
// The interior loop of a 3x3 stride-1 tile (objdump of kiln-bench
// --dump-objects) is, per window row, 3 weight loads, 10 input loads (the
// 8 pixels' lines and the 2 the window adds) and 24 FMAs.
#include "compiler/lower/blocked_depthwise.h"

#include <algorithm>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int_math.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/blocked_conv.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::Var;

// Pixels per tile: the largest width in [4, 8] that divides the row, else 8
// (or the whole row when shorter).
int64_t TileWidth(int64_t ow) {
  for (int64_t t = 8; t >= 4; --t) {
    if (ow % t == 0) return t;
  }
  return std::min<int64_t>(ow, 8);
}

// Planes below which rows are split too: a 16- to 48-channel layer at batch
// 1, which leaves a thread of two idle, or one of them with twice the other's
// share. (Split at 5 planes too, mobilenet_v3_large's 72-channel 5x5 conv
// ran 8-10% slower at one thread, 0.019 -> 0.021 ms: the border rows of
// all planes then run apart from their interiors.)
constexpr int64_t kFewPlanes = 4;
// Work items to offer then: threads x a few, so a late worker still takes
// a share.
constexpr int64_t kMinWorkItems = 16;
// Interior rows per chunk at least, so a chunk's setup stays small.
constexpr int64_t kMinChunkRows = 4;

// How many chunks to split each plane's interior rows into: 1 unless the
// planes are few.
int64_t RowChunks(int64_t planes, int64_t interior_rows) {
  if (planes >= kFewPlanes) return 1;
  return std::max<int64_t>(1,
                           std::min(CeilDiv(kMinWorkItems, planes), interior_rows / kMinChunkRows));
}

// Rows per chunk for about `chunks` chunks of `rows`: of the sizes from
// kMinChunkRows up to rows / chunks, the one leaving the fewest rows over
// (they run serially after the parallel loop), the largest of those.
int64_t ChunkRows(int64_t rows, int64_t chunks) {
  int64_t best = rows / chunks;
  for (int64_t size = best; size >= kMinChunkRows; --size) {
    if (rows % size < rows % best) best = size;
  }
  return best;
}

}  // namespace

Stmt LowerBlockedDepthwise(GroupContext& g, LoopFunction& fn, std::string& summary) {
  const Node* conv = LoneAnchor(g, "conv2d_nchwc_depthwise");
  const bool grouped = conv == nullptr;
  if (grouped) conv = LoneAnchor(g, "conv2d_nchwc_grouped");
  if (conv == nullptr) return nullptr;
  te::ExprBuilder& b = g.b;
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
  const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;  // N, C/16, H, W, 16
  // C/16, KH, KW, 16 (depthwise) or C/16, KH, KW, w, 16 (grouped)
  const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
  const int64_t group = grouped ? ws[3] : 1;
  const std::vector<int64_t>& os = conv->type.shape;             // N, C/16, OH, OW, 16
  const int64_t lanes = os[4];
  const int out = fn.num_params - 1;

  // One parallel iteration per plane (n, cb).
  Var plane = b.NewVar("plane", os[0] * os[1]);
  Expr n = os[0] == 1 ? b.Int(0) : b.Div(b.Ref(plane), b.Int(os[1]));
  Expr cb = os[1] == 1 ? b.Int(0) : b.Mod(b.Ref(plane), b.Int(os[1]));

  const int64_t width = TileWidth(os[3]);
  const int64_t tiles = CeilDiv(os[3], width);
  const bool ragged = tiles * width != os[3];
  Var r = b.NewVar("r", width), l = b.NewVar("v", lanes);
  Var ky = b.NewVar("ky", ws[1]), kx = b.NewVar("kx", ws[2]), j = b.NewVar("j", group);
  const int acc = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"acc", te::ScalarType::kF32, width * lanes, /*local=*/true});
  g.shapes.push_back({width, lanes});
  Expr acc_index = g.FlatIndex({width, lanes}, {b.Ref(r), b.Ref(l)});
  Expr acc_value = b.Load(acc, te::ScalarType::kF32, {b.Ref(r), b.Ref(l)});
  auto tile_loop = [&](Stmt s) {
    return MakeFor(r, ForKind::kUnrolled, MakeFor(l, ForKind::kVector, std::move(s)));
  };

  // The tiles [t_begin, t_end) of output row `oh`, reading the window with
  // bounds checks on the rows (check_y) and columns (check_x) it may leave.
  auto tiles_of = [&](const Expr& oh, int64_t t_begin, int64_t t_end, bool check_y,
                      bool check_x) -> Stmt {
    if (t_end <= t_begin) return nullptr;
    Var tile = b.NewVar("owt", t_end - t_begin);
    Expr ow = b.Add(b.Mul(b.Add(b.Ref(tile), b.Int(t_begin)), b.Int(width)), b.Ref(r));
    Expr ow_read = ragged && check_x ? b.Min(ow, b.Int(os[3] - 1)) : ow;
    Expr y = b.Sub(b.Add(b.Mul(oh, b.Int(a.strides[0])), b.Mul(b.Ref(ky), b.Int(a.dilation[0]))),
                   b.Int(a.padding[0]));
    Expr x =
        b.Sub(b.Add(b.Mul(ow_read, b.Int(a.strides[1])), b.Mul(b.Ref(kx), b.Int(a.dilation[1]))),
              b.Int(a.padding[1]));
    Expr inside;
    auto require = [&](Expr c) { inside = inside ? b.Binary(te::BinaryOp::kAnd, inside, c) : c; };
    if (check_y) {
      require(b.InRange(y, xs[2]));
      y = b.ClampIndex(y, xs[2]);
    }
    if (check_x) {
      require(b.InRange(x, xs[3]));
      x = b.ClampIndex(x, xs[3]);
    }
    // Grouped: lane l reads the j-th lane of its group.
    Expr lane =
        grouped ? b.Add(b.Mul(b.Div(b.Ref(l), b.Int(group)), b.Int(group)), b.Ref(j)) : b.Ref(l);
    Expr data = g.ValueOf(conv->inputs[0], {n, cb, y, x, lane});
    if (inside) data = b.Select(inside, data, b.Float(0));
    Expr weight = grouped
                      ? g.ValueOf(conv->inputs[1], {cb, b.Ref(ky), b.Ref(kx), b.Ref(j), b.Ref(l)})
                      : g.ValueOf(conv->inputs[1], {cb, b.Ref(ky), b.Ref(kx), b.Ref(l)});
    Stmt init = tile_loop(MakeStore(acc, acc_index, b.Float(0)));
    Stmt update = MakeStore(acc, acc_index, g.Flatten(b.Add(acc_value, b.Mul(data, weight))));
    Stmt tap = grouped ? MakeFor(j, ForKind::kUnrolled, tile_loop(update)) : tile_loop(update);
    Stmt taps = MakeFor(ky, ForKind::kSerial, MakeFor(kx, ForKind::kUnrolled, tap));
    // The epilogue: the group's element with the conv's replaced by acc + bias.
    std::vector<Expr> idx{n, cb, oh, ow, b.Ref(l)};
    Expr conv_value = acc_value;
    if (conv->inputs.size() == 3) {
      conv_value = b.Add(conv_value, g.ValueOf(conv->inputs[2], {cb, b.Ref(l)}));
    }
    std::vector<const te::ExprNode*> key;
    for (const Expr& e : idx) key.push_back(e.get());
    g.memo[{conv, key}] = conv_value;
    Expr value = g.ValueOf(g.members.back(), idx);
    Expr in_row = ragged && check_x ? b.Compare(te::CompareOp::kLT, ow, b.Int(os[3])) : nullptr;
    Stmt store = tile_loop(MakeStore(out, g.FlatIndex(os, idx), g.Flatten(value), in_row));
    return MakeFor(tile, ForKind::kSerial, MakeSeq({init, taps, store}));
  };

  // Rows and tiles whose windows stay inside the input need no checks:
  // outputs o with o * s - pad >= 0 and o * s + (K - 1) * d - pad <= extent
  // - 1.
  auto interior = [&](int d, int64_t extent, int64_t out_extent, int64_t& lo, int64_t& hi) {
    const int64_t s = a.strides[d], pad = a.padding[d];
    const int64_t reach = (ws[1 + d] - 1) * a.dilation[d];
    lo = std::min(CeilDiv(pad, s), out_extent);
    const int64_t last = extent - 1 + pad - reach;
    hi = last < 0 ? lo : std::clamp(last / s + 1, lo, out_extent);
  };
  int64_t oh_lo, oh_hi, ow_lo, ow_hi;
  interior(0, xs[2], os[2], oh_lo, oh_hi);
  interior(1, xs[3], os[3], ow_lo, ow_hi);
  const int64_t t_lo = std::min(CeilDiv(ow_lo, width), tiles);
  const int64_t t_hi = std::max(t_lo, ow_hi / width);  // whole tiles only: not the ragged one
  // One output row `oh` of the plane, its tiles in three column ranges.
  auto row = [&](const Expr& oh, bool check_y) {
    std::vector<Stmt> parts;
    for (Stmt s : {tiles_of(oh, 0, t_lo, check_y, true), tiles_of(oh, t_lo, t_hi, check_y, false),
                   tiles_of(oh, t_hi, tiles, check_y, true)}) {
      if (s) parts.push_back(s);
    }
    return MakeSeq(std::move(parts));
  };
  // Rows [begin, end) of the plane, checked or not.
  auto rows_of = [&](int64_t begin, int64_t end, bool check_y) -> Stmt {
    if (end <= begin) return nullptr;
    Var oh = b.NewVar("oh", end - begin);
    return MakeFor(oh, ForKind::kSerial, row(b.Add(b.Ref(oh), b.Int(begin)), check_y));
  };
  const int64_t work = os[0] * os[1] * os[2] * os[3] * lanes * ws[1] * ws[2] * group;
  const bool parallel = work >= kParallelWorkThreshold;
  const int64_t chunks = parallel ? RowChunks(plane->extent, oh_hi - oh_lo) : 1;
  if (chunks > 1) {
    // Few planes: the parallel loop runs over (plane, chunk of interior
    // rows); the checked border rows (a row or two) and the interior rows
    // past the last whole chunk (fewer than a chunk's) run serially around
    // it. (Clamping a ragged last chunk's rows instead recomputed up to a
    // chunk less one row and cost 5-10% at one thread.)
    const int64_t per_chunk = ChunkRows(oh_hi - oh_lo, chunks);
    const int64_t used = (oh_hi - oh_lo) / per_chunk;
    const int64_t rest = oh_lo + used * per_chunk;
    Var item = b.NewVar("item", plane->extent * used);
    Var top = b.NewVar("plane", plane->extent), bottom = b.NewVar("plane", plane->extent);
    Var i = b.NewVar("oh", per_chunk);
    Expr oh = b.Add(b.Add(b.Mul(b.Mod(b.Ref(item), b.Int(used)), b.Int(per_chunk)), b.Ref(i)),
                    b.Int(oh_lo));
    // tiles_of reads the plane's (n, cb) when called: each stage sets them
    // to its own loop's plane first.
    auto plane_is = [&](const Expr& value) {
      n = os[0] == 1 ? b.Int(0) : b.Div(value, b.Int(os[1]));
      cb = os[1] == 1 ? b.Int(0) : b.Mod(value, b.Int(os[1]));
    };
    std::vector<Stmt> stages;
    plane_is(b.Ref(top));
    if (Stmt s = rows_of(0, oh_lo, true)) stages.push_back(MakeFor(top, ForKind::kSerial, s));
    plane_is(b.Div(b.Ref(item), b.Int(used)));
    stages.push_back(
        MakeFor(item, ForKind::kParallel, MakeFor(i, ForKind::kSerial, row(oh, false))));
    plane_is(b.Ref(bottom));
    std::vector<Stmt> last;
    for (Stmt s : {rows_of(rest, oh_hi, false), rows_of(oh_hi, os[2], true)}) {
      if (s) last.push_back(s);
    }
    if (!last.empty()) stages.push_back(MakeFor(bottom, ForKind::kSerial, MakeSeq(last)));
    summary = absl::StrCat(grouped ? "blocked grouped " : "blocked depthwise ", width,
                           "-pixel tiles, rows in ", used, " chunks");
    return MakeSeq(std::move(stages));
  }
  std::vector<Stmt> rows;
  for (auto [begin, end] :
       {std::pair{int64_t{0}, oh_lo}, std::pair{oh_lo, oh_hi}, std::pair{oh_hi, os[2]}}) {
    if (Stmt s = rows_of(begin, end, begin != oh_lo || end != oh_hi)) rows.push_back(s);
  }
  const ForKind kind = plane->extent > 1 && parallel ? ForKind::kParallel : ForKind::kSerial;
  summary =
      absl::StrCat(grouped ? "blocked grouped " : "blocked depthwise ", width, "-pixel tiles");
  return MakeFor(plane, kind, MakeSeq(std::move(rows)));
}

}  // namespace kiln::lower
