// A lone pool, plane by plane, in flat passes.
//
// Row by row (RowAccumulated) a pool's short rows cost more in loop
// overhead, partitioned edges and clamped selects than in loads: googlenet's
// 3x3/s1/p1 pools on 14-wide rows ran one masked vector per row, its 3x3/s2
// pool on 28-wide rows 13 gathers per row. Here each plane (n, c) is a few
// long loops over flat positions instead, each tap of the window a load at
// a constant offset from the position, edges apart.
//
// Max pools, any stride, take the separable form: the max over the window's
// rows, then over its columns (3 + 3 taps instead of 9 for 3x3), through a
// stack plane of row maxima `rows` (OH x W elements, at most 16 KiB):
//   1. rows[y][x] = max over ky of in[y * sy - pt + ky * dh][x]. At stride 1
//      the interior rows [y0, y1) (those whose window rows all lie inside)
//      are one flat loop: p's taps are p + (ky * dh - pt) * W, no column edge
//      to mind. At larger strides a loop over those rows, each one flat loop
//      (prefetching the next plane as it goes: plane_prefetch.cc). Each of
//      the few edge rows is a loop of its own with only its taps inside.
//   2. out[y][x] = max over kx of rows[y][x * sx - pl + kx * dw]. Where W ==
//      sx * OW (stride 1 keeping the width; stride 2 halving an even width)
//      that is rows[sx * p - pl + kx * dw] for the flat output position p:
//      one flat loop from (0, x0) to (OH - 1, x1 - 1), its stride-2 loads
//      made 16-lane blocks by BlockStridedVectorLoops, right at the interior
//      columns and wrapped into the neighbouring row at the others,
//   3. which are then written again, each edge column a loop over the rows
//      with only its taps inside the input. (Where W != sx * OW, step 2 is a
//      loop over rows of the interior columns, and step 3 the same.)
// Max is exact in any order (NaN wins wherever it is), so the result is the
// row-by-row kernel's.
//
// Blocked max pools (N, C/16, H, W, 16), as ConvertLayoutNchwc leaves them,
// of horizontal stride 1 take the separable form one output row at a time:
// the max over the window's rows of each of the W input pixels into a band
// of W x 16 lanes on the stack, then over its columns into the output row,
// each pixel one vector value (edge rows and columns with only their taps
// inside). A band of one row stays in L1 whatever the plane. googlenet's
// seven 3x3/s1/p1 pools, 1 thread, AMD EPYC (Zen 5), median kernel times:
// pixel by pixel 9 loads, 8 vmaxps and the NaN tests per pixel, 0.020 ms
// on 192 x 28 x 28, 0.013 on 512 x 14 x 14; separable 0.014 and 0.009. At
// stride 2 the vertical pass covers twice the output's pixels and saves no
// loads: those pools stay pixel by pixel.
//
// Average pools keep the window whole (a different sum order would change
// their rounding, and their edges divide by counts), at stride 1 keeping the
// row width only:
//
//        x0        x1            per plane (n, c):
//   +----+---------+----+        1. top rows [0, y0): the generic row
//   | top rows          |           (window clamped, vectorised along x);
//   +----+---------+----+        2. interior: flat positions from (y0, x0)
//   |fix | interior|fix |           to (y1 - 1, x1 - 1) in one loop, every
//   |    | (flat)  |    |           tap an unclamped load at its offset;
//   +----+---------+----+        3. the columns [0, x0) and [x1, W) of the
//   | bottom rows       |           interior rows, which step 2 also wrote
//   +-------------------+           (wrapped taps) and must come after it;
//                                4. bottom rows [y1, OH): the generic row.
// Steps 1, 3 and 4 take the group's own value with the window unrolled, as
// RowAccumulated would, and the loop passes partition their edges.
//
// Every tap of a flat loop stays inside the plane: p's window starts at or
// after (0, 0) and ends at or before (H - 1, W - 1). A flat loop runs in
// whole 16-lane blocks and one more block ending at its end (storing some
// equal values twice) instead of a scalar remainder.
//
// Measured on googlenet's pools, 1 thread, Intel Xeon (avx512f), median
// kernel times. Its nine 3x3/s1/p1 pools: row by row 1.58 ms in all (0.200
// ms on 512 x 14 x 14); flattened 9-tap 0.80 ms (0.095); separable 0.38 ms
// (0.037). In the model, its 3x3/s2/ceil pool on 480 x 28 x 28 0.254 ->
// 0.067 ms, on 192 x 56 x 56 0.147 -> 0.108. Planes of row maxima above
// kMaxRowsBytes stay row by row (resnet18's stem pool: see there).
#include "compiler/lower/pool_planes.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <variant>

#include "common/int_math.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/plane_prefetch.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

// Fewer interior elements than this per plane run row by row as before.
constexpr int64_t kMinInterior = 16;
// The most bytes of row maxima a separable max pool keeps on the stack (an
// integer pool's are int64, twice a float32 one's). Larger planes of row
// maxima stay row by row: resnet18's stem pool (56 x 112 floats, 25 KiB)
// ran faster alone, but in the model, reading the conv it follows, it went
// from 0.21 to 0.245 ms at batch 1 and 2.4 to 2.7 ms at batch 8.
constexpr int64_t kMaxRowsBytes = 16 << 10;
// At most this many edge rows (or columns) are written one by one.
constexpr int64_t kMaxEdges = 8;
// Windows up to this many taps are unrolled in the edge stores.
constexpr int64_t kMaxUnrolledWindow = 16;

Expr Combine(te::ExprBuilder& b, te::ReduceOp op, const Expr& a, const Expr& c) {
  switch (op) {
    case te::ReduceOp::kSum:
      return b.Add(a, c);
    case te::ReduceOp::kProd:
      return b.Mul(a, c);
    case te::ReduceOp::kMax:
      return b.Max(a, c);
    case te::ReduceOp::kMin:
      return b.Min(a, c);
  }
  return a;
}

// `value` with each reduction over a short window replaced by its terms
// combined in window order (ky outer, kx inner), as the reduction's own
// loop would combine them.
Expr UnrollShortReductions(te::ExprBuilder& b, const Expr& value) {
  return b.Rewrite(value, [&b](const Expr& e) -> Expr {
    if (e->kind != ExprKind::kReduce) return e;
    int64_t taps = 1;
    for (const Var& v : e->reduce_vars) taps *= v->extent;
    if (taps > kMaxUnrolledWindow) return e;
    std::vector<Expr> terms{e->operands[0]};
    for (const Var& v : e->reduce_vars) {
      std::vector<Expr> next;
      for (const Expr& t : terms) {
        for (int64_t j = 0; j < v->extent; ++j) next.push_back(b.Substitute(t, {v}, {b.Int(j)}));
      }
      terms = std::move(next);
    }
    Expr combined = terms[0];
    for (size_t j = 1; j < terms.size(); ++j)
      combined = Combine(b, e->reduce_op(), combined, terms[j]);
    return combined;
  });
}

// A flat loop over plane positions [lo, hi) storing `value_at(p)` into
// `buffer` at `base` + p: whole 16-lane blocks, then one block ending at hi
// (overlapping the last whole one, storing equal values again) instead of a
// scalar remainder; a short range is one loop.
void FlatLoop(te::ExprBuilder& b, int buffer, const Expr& base, int64_t lo, int64_t hi,
              const std::function<Expr(const Expr&)>& value_at, std::vector<Stmt>& stages) {
  constexpr int64_t kLanes = 16;
  const int64_t n = hi - lo;
  if (n <= 0) return;
  auto loop = [&](int64_t start, int64_t extent) {
    Var r = b.NewVar("p", extent);
    const Expr p = extent == 1 ? b.Int(start) : b.Add(b.Ref(r), b.Int(start));
    Stmt s = MakeStore(buffer, b.Add(base, p), value_at(p));
    stages.push_back(extent == 1 ? s : MakeFor(r, ForKind::kVectorized, s));
  };
  if (n < kLanes || n % kLanes == 0) {
    loop(lo, n);
    return;
  }
  loop(lo, n / kLanes * kLanes);
  loop(hi - kLanes, kLanes);
}

// What every form shares: the pool and its shapes.
struct PoolPlane {
  const Node* pool = nullptr;
  const Pool2DAttrs* a = nullptr;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
};

// The output positions [lo, hi) along one dim (input extent n, window k,
// stride s, dilation d, leading padding pad, `out` outputs) whose whole
// window lies inside the input.
std::pair<int64_t, int64_t> Interior(int64_t n, int64_t k, int64_t s, int64_t d, int64_t pad,
                                     int64_t out) {
  const int64_t lo = CeilDiv(pad, s);
  const int64_t last = n - 1 + pad - d * (k - 1);  // the last window start inside, padded
  const int64_t hi = last < 0 ? 0 : std::min(out, last / s + 1);
  return {lo, std::max(lo, hi)};
}

// The window taps (0 to k - 1) inside an input of extent n for output
// position o: start o * s - pad, step d.
std::vector<int64_t> TapsInside(int64_t o, int64_t n, int64_t k, int64_t s, int64_t d,
                                int64_t pad) {
  std::vector<int64_t> taps;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t i = o * s - pad + t * d;
    if (i >= 0 && i < n) taps.push_back(t);
  }
  return taps;
}

// Whether every output row and column has a window tap inside the input
// (a max over no taps has no value to start from).
bool EveryOutputHasTaps(const PoolPlane& pp) {
  const Pool2DAttrs& a = *pp.a;
  for (int64_t y = 0; y < pp.oh; ++y) {
    if (TapsInside(y, pp.h, a.kernel[0], a.strides[0], a.dilation[0], a.padding[0]).empty()) {
      return false;
    }
  }
  for (int64_t x = 0; x < pp.ow; ++x) {
    if (TapsInside(x, pp.w, a.kernel[1], a.strides[1], a.dilation[1], a.padding[1]).empty()) {
      return false;
    }
  }
  return true;
}

// The 9-tap form of a stride-1 pool (see the design note), or null.
Stmt FlatWindow(GroupContext& g, const PoolPlane& pp, const std::vector<Var>& out_vars,
                int out_buffer, const Expr& value) {
  te::ExprBuilder& b = g.b;
  const Pool2DAttrs& a = *pp.a;
  const int64_t w = pp.w, ow = pp.ow;
  if (a.strides[0] != 1 || a.strides[1] != 1 || ow != w) return nullptr;
  const auto [y0, y1] = Interior(pp.h, a.kernel[0], 1, a.dilation[0], a.padding[0], pp.oh);
  const auto [x0, x1] = Interior(w, a.kernel[1], 1, a.dilation[1], a.padding[1], ow);
  if (y1 <= y0 || x1 <= x0 || (y1 - 1) * w + x1 - (y0 * w + x0) < kMinInterior) return nullptr;
  const Expr n = b.Ref(out_vars[0]), c = b.Ref(out_vars[1]);
  const std::vector<int64_t>& os = pp.pool->type.shape;
  const Expr out_plane = g.FlatIndex(os, {n, c, b.Int(0), b.Int(0)});
  std::vector<Stmt> stages;
  auto region = [&](int64_t row_lo, int64_t row_hi, int64_t col_lo, int64_t col_hi) {
    if (row_hi <= row_lo || col_hi <= col_lo) return;
    Var y = b.NewVar("y", row_hi - row_lo), x = b.NewVar("x", col_hi - col_lo);
    const Expr ye = y->extent == 1 ? b.Int(row_lo) : b.Add(b.Ref(y), b.Int(row_lo));
    const Expr xe = x->extent == 1 ? b.Int(col_lo) : b.Add(b.Ref(x), b.Int(col_lo));
    Stmt s = MakeStore(out_buffer, g.FlatIndex(os, {n, c, ye, xe}),
                       g.Flatten(b.Substitute(UnrollShortReductions(b, value),
                                              {out_vars[2], out_vars[3]}, {ye, xe})));
    if (x->extent > 1) s = MakeFor(x, ForKind::kVectorized, s);
    if (y->extent > 1) s = MakeFor(y, ForKind::kSerial, s);
    stages.push_back(s);
  };
  region(0, y0, 0, ow);  // 1
  FlatLoop(
      b, out_buffer, out_plane, y0 * w + x0, (y1 - 1) * w + x1,
      [&](const Expr& p) {  // 2
        Expr combined;
        for (int64_t ky = 0; ky < a.kernel[0]; ++ky) {
          for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
            const int64_t offset =
                (ky * a.dilation[0] - a.padding[0]) * w + kx * a.dilation[1] - a.padding[1];
            Expr tap =
                g.Flatten(g.ValueOf(pp.pool->inputs[0], {n, c, b.Int(0), b.Add(p, b.Int(offset))}));
            combined = !combined ? tap : b.Add(combined, tap);
          }
        }
        return b.Div(combined,
                     b.Constant(combined->type, static_cast<double>(a.kernel[0] * a.kernel[1])));
      },
      stages);
  region(y0, y1, 0, x0);  // 3
  region(y0, y1, x1, ow);
  region(y1, pp.oh, 0, ow);  // 4
  return MakeSeq(std::move(stages));
}

// The separable form of a max pool of any stride (see the design note), or
// null: the max over the window's rows into a plane of `rows` (a local
// buffer), then over its columns, each pass flat over the plane where its
// stride allows, with only the taps inside the input at the edges.
Stmt SeparableMax(GroupContext& g, const PoolPlane& pp, const std::vector<Var>& out_vars,
                  int out_buffer, std::vector<BufferDecl>& buffers) {
  te::ExprBuilder& b = g.b;
  const Pool2DAttrs& a = *pp.a;
  const int64_t h = pp.h, w = pp.w, oh = pp.oh, ow = pp.ow;
  const int64_t sy = a.strides[0], sx = a.strides[1], dy = a.dilation[0], dx = a.dilation[1];
  const int64_t pt = a.padding[0], pl = a.padding[1];
  const auto [y0, y1] = Interior(h, a.kernel[0], sy, dy, pt, oh);
  const auto [x0, x1] = Interior(w, a.kernel[1], sx, dx, pl, ow);
  if (y1 <= y0 || x1 <= x0 || oh - (y1 - y0) > kMaxEdges || ow - (x1 - x0) > kMaxEdges) {
    return nullptr;
  }
  if (!EveryOutputHasTaps(pp)) return nullptr;
  const Expr n = b.Ref(out_vars[0]), c = b.Ref(out_vars[1]);
  const Expr out_plane = g.FlatIndex(pp.pool->type.shape, {n, c, b.Int(0), b.Int(0)});
  auto input = [&](const Expr& pos) {
    return g.Flatten(g.ValueOf(pp.pool->inputs[0], {n, c, b.Int(0), pos}));
  };
  const te::ScalarType type = input(b.Int(0))->type;
  if (oh * w * (type == te::ScalarType::kF32 ? 4 : 8) > kMaxRowsBytes) return nullptr;
  const int rows = static_cast<int>(buffers.size());
  buffers.push_back({"rows", type, oh * w, /*local=*/true});
  g.shapes.push_back({oh * w});
  auto rows_at = [&](const Expr& pos) { return b.Load(rows, type, {pos}); };
  auto max_of = [&](const std::vector<Expr>& taps) {
    Expr m = taps[0];
    for (size_t i = 1; i < taps.size(); ++i) m = b.Max(m, taps[i]);
    return m;
  };
  std::vector<Stmt> stages;
  // 1. rows[y * W + x] = max over ky of in[y * sy - pt + ky * dy][x]. At
  // stride 1 the interior rows are one flat loop (tap ky at p + (ky * dy -
  // pt) * W); at larger strides a loop over them, each row a flat loop.
  // Each edge row is a flat loop of its own taps.
  auto row_max = [&](const Expr& y, const std::vector<int64_t>& taps) {
    return [&, y, taps](const Expr& x) {
      std::vector<Expr> loads;
      for (int64_t t : taps) {
        loads.push_back(
            input(b.Add(b.Mul(b.Add(b.Mul(y, b.Int(sy)), b.Int(t * dy - pt)), b.Int(w)), x)));
      }
      return max_of(loads);
    };
  };
  std::vector<int64_t> all_rows(a.kernel[0]);
  for (int64_t t = 0; t < a.kernel[0]; ++t) all_rows[t] = t;
  for (int64_t y = 0; y < y0; ++y) {
    FlatLoop(b, rows, b.Int(y * w), 0, w,
             row_max(b.Int(y), TapsInside(y, h, a.kernel[0], sy, dy, pt)), stages);
  }
  if (sy == 1) {
    FlatLoop(
        b, rows, b.Int(0), y0 * w, y1 * w,
        [&](const Expr& p) {
          std::vector<Expr> loads;
          for (int64_t t : all_rows) loads.push_back(input(b.Add(p, b.Int((t * dy - pt) * w))));
          return max_of(loads);
        },
        stages);
  } else {
    Var y = b.NewVar("y", y1 - y0);
    const Expr ye = b.Add(b.Ref(y), b.Int(y0));
    std::vector<Stmt> row;
    FlatLoop(b, rows, b.Mul(ye, b.Int(w)), 0, w, row_max(ye, all_rows), row);
    // The loop over rows reads the plane in order: it prefetches the next.
    stages.push_back(
        PrefetchNextPlane(g, pp.pool, n, c, MakeFor(y, ForKind::kSerial, MakeSeq(std::move(row)))));
  }
  for (int64_t y = y1; y < oh; ++y) {
    FlatLoop(b, rows, b.Int(y * w), 0, w,
             row_max(b.Int(y), TapsInside(y, h, a.kernel[0], sy, dy, pt)), stages);
  }
  // 2. out[y][x] = max over kx of rows[y][x * sx - pl + kx * dx]. Where W ==
  // sx * OW that is rows[sx * p - pl + kx * dx] for the flat output
  // position p: one flat loop from (0, x0) to (OH - 1, x1 - 1), wrong at
  // the edge columns of the rows between (step 3 rewrites them); else a
  // loop over rows, each a loop over the interior columns.
  auto col_max = [&](const Expr& at) {
    std::vector<Expr> loads;
    for (int64_t t = 0; t < a.kernel[1]; ++t) {
      loads.push_back(rows_at(b.Add(b.Mul(at, b.Int(sx)), b.Int(t * dx - pl))));
    }
    return max_of(loads);
  };
  if (w == sx * ow) {
    FlatLoop(b, out_buffer, out_plane, x0, (oh - 1) * ow + x1, col_max, stages);
  } else {
    Var y = b.NewVar("y", oh);
    std::vector<Stmt> row;
    // rows[y * W + (x * sx ...)]: the row's start folded into the position.
    FlatLoop(
        b, out_buffer, b.Add(out_plane, b.Mul(b.Ref(y), b.Int(ow))), x0, x1,
        [&](const Expr& x) {
          std::vector<Expr> loads;
          for (int64_t t = 0; t < a.kernel[1]; ++t) {
            loads.push_back(rows_at(
                b.Add(b.Add(b.Mul(b.Ref(y), b.Int(w)), b.Mul(x, b.Int(sx))), b.Int(t * dx - pl))));
          }
          return max_of(loads);
        },
        row);
    stages.push_back(MakeFor(y, ForKind::kSerial, MakeSeq(std::move(row))));
  }
  // 3. Each edge column, over every row, with its own taps.
  for (int64_t x = 0; x < ow; ++x) {
    if (x == x0) x = x1;
    if (x >= ow) break;
    Var y = b.NewVar("y", oh);
    std::vector<Expr> loads;
    for (int64_t t : TapsInside(x, w, a.kernel[1], sx, dx, pl)) {
      loads.push_back(rows_at(b.Add(b.Mul(b.Ref(y), b.Int(w)), b.Int(x * sx - pl + t * dx))));
    }
    stages.push_back(
        MakeFor(y, ForKind::kSerial,
                MakeStore(out_buffer, b.Add(out_plane, b.Add(b.Mul(b.Ref(y), b.Int(ow)), b.Int(x))),
                          max_of(loads))));
  }
  return MakeSeq(std::move(stages));
}

// The separable form of a blocked max pool (N, C/16, H, W, 16) of
// horizontal stride 1, or null: one output row at a time, the max over the
// window's rows into a row of W pixels (`band`, a local buffer of W x 16
// lanes), then over its columns into the output row, each pixel one vector
// value. Edge rows and columns take only their taps inside the input.
Stmt SeparableMaxBlocked(GroupContext& g, const PoolPlane& pp, const std::vector<Var>& out_vars,
                         int out_buffer, std::vector<BufferDecl>& buffers) {
  constexpr int64_t kLanes = 16;
  te::ExprBuilder& b = g.b;
  const Pool2DAttrs& a = *pp.a;
  const int64_t h = pp.h, w = pp.w, oh = pp.oh, ow = pp.ow;
  const int64_t sy = a.strides[0], sx = a.strides[1], dy = a.dilation[0], dx = a.dilation[1];
  const int64_t pt = a.padding[0], pl = a.padding[1];
  const std::vector<int64_t>& os = pp.pool->type.shape;
  if (os[4] != kLanes || sx != 1 || a.kernel[0] < 2 || a.kernel[1] < 2) return nullptr;
  const auto [y0, y1] = Interior(h, a.kernel[0], sy, dy, pt, oh);
  const auto [x0, x1] = Interior(w, a.kernel[1], sx, dx, pl, ow);
  if (oh - (y1 - y0) > kMaxEdges || ow - (x1 - x0) > kMaxEdges) return nullptr;
  if (!EveryOutputHasTaps(pp)) return nullptr;
  const Expr n = b.Ref(out_vars[0]), c = b.Ref(out_vars[1]);
  auto input = [&](const Expr& y, const Expr& x, const Expr& lane) {
    return g.Flatten(g.ValueOf(pp.pool->inputs[0], {n, c, y, x, lane}));
  };
  const te::ScalarType type = input(b.Int(0), b.Int(0), b.Int(0))->type;
  if (w * kLanes * (type == te::ScalarType::kF32 ? 4 : 8) > kMaxRowsBytes) return nullptr;
  const int band = static_cast<int>(buffers.size());
  buffers.push_back({"band", type, w * kLanes, /*local=*/true});
  g.shapes.push_back({w * kLanes});
  auto max_of = [&](const std::vector<Expr>& taps) {
    Expr m = taps[0];
    for (size_t i = 1; i < taps.size(); ++i) m = b.Max(m, taps[i]);
    return m;
  };
  // A loop over `extent` pixels from `first` (one pixel: no loop), each
  // storing value(x, lane) into `buffer` at index(x, lane).
  auto pixels = [&](int64_t first, int64_t extent, int buffer,
                    const std::function<Expr(const Expr&, const Expr&)>& index,
                    const std::function<Expr(const Expr&, const Expr&)>& value) -> Stmt {
    Var x = b.NewVar("x", extent);
    Var lane = b.NewVar("l", kLanes);
    const Expr xe = extent == 1 ? b.Int(first) : b.Add(b.Ref(x), b.Int(first));
    Stmt s = MakeFor(lane, ForKind::kVector,
                     MakeStore(buffer, index(xe, b.Ref(lane)), value(xe, b.Ref(lane))));
    return extent == 1 ? s : MakeFor(x, ForKind::kSerial, s);
  };
  std::vector<int64_t> all_columns(a.kernel[1]);
  for (int64_t t = 0; t < a.kernel[1]; ++t) all_columns[t] = t;
  // Output row y (`row_taps` its window rows inside the input).
  auto row = [&](const Expr& y, const std::vector<int64_t>& row_taps) {
    std::vector<Stmt> stages;
    auto band_at = [&](const Expr& x, const Expr& lane) {
      return b.Add(b.Mul(x, b.Int(kLanes)), lane);
    };
    // 1. band[x] = max over the window's rows of in[y * sy - pt + ky * dy][x].
    stages.push_back(pixels(0, w, band, band_at, [&](const Expr& x, const Expr& lane) {
      std::vector<Expr> taps;
      for (int64_t t : row_taps) {
        taps.push_back(input(b.Add(b.Mul(y, b.Int(sy)), b.Int(t * dy - pt)), x, lane));
      }
      return max_of(taps);
    }));
    // 2. out[y][x] = max over kx of band[x - pl + kx * dx], interior columns
    // together, each edge column with its own taps.
    auto out_at = [&](const Expr& x, const Expr& lane) {
      return g.FlatIndex(os, {n, c, y, x, lane});
    };
    auto column_max = [&](const std::vector<int64_t>& taps) {
      return [&, taps](const Expr& x, const Expr& lane) {
        std::vector<Expr> loads;
        for (int64_t t : taps) {
          loads.push_back(b.Load(band, type, {band_at(b.Add(x, b.Int(t * dx - pl)), lane)}));
        }
        return max_of(loads);
      };
    };
    if (x1 > x0) stages.push_back(pixels(x0, x1 - x0, out_buffer, out_at, column_max(all_columns)));
    for (int64_t x = 0; x < ow; ++x) {
      if (x == x0) x = x1;
      if (x >= ow) break;
      stages.push_back(
          pixels(x, 1, out_buffer, out_at, column_max(TapsInside(x, w, a.kernel[1], sx, dx, pl))));
    }
    return MakeSeq(std::move(stages));
  };
  std::vector<Stmt> rows;
  for (int64_t y = 0; y < y0; ++y)
    rows.push_back(row(b.Int(y), TapsInside(y, h, a.kernel[0], sy, dy, pt)));
  if (y1 > y0) {
    std::vector<int64_t> all_rows(a.kernel[0]);
    for (int64_t t = 0; t < a.kernel[0]; ++t) all_rows[t] = t;
    Var y = b.NewVar("y", y1 - y0);
    rows.push_back(MakeFor(y, ForKind::kSerial, row(b.Add(b.Ref(y), b.Int(y0)), all_rows)));
  }
  for (int64_t y = y1; y < oh; ++y)
    rows.push_back(row(b.Int(y), TapsInside(y, h, a.kernel[0], sy, dy, pt)));
  return MakeSeq(std::move(rows));
}

}  // namespace

Stmt PoolOverPlanes(GroupContext& g, const std::vector<Var>& out_vars, int out_buffer,
                    const Expr& value, std::vector<BufferDecl>& buffers) {
  if (g.members.size() != 1 || (out_vars.size() != 4 && out_vars.size() != 5)) return nullptr;
  const bool blocked = out_vars.size() == 5;
  PoolPlane pp;
  pp.pool = g.members.back();
  const bool average = pp.pool->op->name == "avg_pool2d";
  if (!average && pp.pool->op->name != "max_pool2d") return nullptr;
  if (!g.param_index.count(pp.pool->inputs[0])) return nullptr;
  const Pool2DAttrs& a = std::get<Pool2DAttrs>(pp.pool->attrs);
  pp.a = &a;
  const std::vector<int64_t>& xs = pp.pool->inputs[0]->type.shape;
  const std::vector<int64_t>& os = pp.pool->type.shape;
  pp.h = xs[2], pp.w = xs[3], pp.oh = os[2], pp.ow = os[3];
  Stmt body;
  if (blocked) {
    if (!average) body = SeparableMaxBlocked(g, pp, out_vars, out_buffer, buffers);
  } else {
    body = average ? FlatWindow(g, pp, out_vars, out_buffer, value)
                   : SeparableMax(g, pp, out_vars, out_buffer, buffers);
  }
  if (!body) return nullptr;
  // The planes: the outer of the loops over image and channel is parallel
  // when the work is large, as LoopNest decides for the generic nest.
  int64_t work = 1;
  for (const Var& v : out_vars) work *= v->extent;
  work *= 1 + a.kernel[0] * a.kernel[1];
  const bool parallel = work >= kParallelWorkThreshold;
  if (out_vars[1]->extent > 1) {
    const bool outer = out_vars[0]->extent == 1;
    body = MakeFor(out_vars[1], outer && parallel ? ForKind::kParallel : ForKind::kSerial, body);
  }
  if (out_vars[0]->extent > 1) {
    body = MakeFor(out_vars[0], parallel ? ForKind::kParallel : ForKind::kSerial, body);
  }
  return body;
}

}  // namespace kiln::lower
