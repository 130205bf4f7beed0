// Stride-1 pools over the flattened plane.
//
// A stride-1 pool whose padding keeps the row width (googlenet's 3x3/s1/p1
// max pools in every inception block) reads, for the output at flat plane
// position p = y * W + x, the inputs at p + (ky * dh - pt) * W + (kx * dw -
// pl): one constant offset per window tap, the same for every p whose window
// lies inside the input. Row by row (RowAccumulated), a 14-wide row is one
// masked vector, and the loop overhead, the partitioned edges and the
// clamped selects of each row cost more than its nine loads; flattened, the
// interior of a 14 x 14 plane is one vector loop of 166 elements.
//
// Max pools take the separable form: max over the window's rows, then over
// its columns (3 + 3 taps instead of 9 for 3x3), through a stack plane of
// row maxima `rows` (OH x W, in L1):
//   1. rows[y][x] = max over ky of in[y - pt + ky * dh][x]: the interior
//      rows [y0, y1) as one flat loop (no row edge to mind: a row's taps are
//      whole rows above and below), each of the few edge rows with only its
//      taps inside the input;
//   2. out[p] = max over kx of rows[p - pl + kx * dw], flat from (0, x0) to
//      (OH - 1, x1 - 1): right for the interior columns, wrapped into the
//      neighbouring row at the others,
//   3. which are then written again, each edge column a loop over the rows
//      with only its taps inside the input (2 loads for a 3-wide window).
// Max is exact in any order (NaN wins wherever it is), so the result is the
// row-by-row kernel's. Average pools keep the window whole (a different sum
// order would change their rounding, and their edges divide by counts):
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
// Every tap of the flat loops stays inside the plane: p's window starts at or
// after (y0 - pt, x0 - pl) = (0, 0) and ends at or before (H - 1, W - 1).
// Steps 1, 3 and 4 take the group's own value with the window unrolled, as
// RowAccumulated would, and the loop passes partition their edges. A flat
// loop runs in whole 16-lane blocks and one more block ending at its end
// (storing some equal values twice) instead of a scalar remainder.
//
// googlenet's nine stride-1 pools, 1 thread, Intel Xeon (avx512f), median
// kernel times: row by row 1.58 ms in all (0.200 ms on 512 x 14 x 14);
// flattened 9-tap 0.80 ms (0.095); separable 0.38 ms (0.037).
#include "compiler/lower/flat_plane_pool.h"

#include <algorithm>
#include <functional>
#include <variant>

#include "compiler/ir/op_def.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

// Fewer interior elements than this per plane run row by row as before.
constexpr int64_t kMinInterior = 16;
// The largest plane (elements) a separable max pool keeps its row maxima
// of on the stack.
constexpr int64_t kMaxSeparablePlane = 16384;
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
    for (size_t j = 1; j < terms.size(); ++j) combined = Combine(b, e->reduce_op(), combined, terms[j]);
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

// What every form shares: the pool, its shapes and its interior.
struct PoolPlane {
  const Node* pool = nullptr;
  const Pool2DAttrs* a = nullptr;
  bool average = false;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // interior rows [y0, y1), columns [x0, x1)
};

// The 9-tap form (see the design note).
Stmt FlatWindow(GroupContext& g, const PoolPlane& pp, const std::vector<Var>& out_vars,
                int out_buffer, const Expr& value) {
  te::ExprBuilder& b = g.b;
  const Pool2DAttrs& a = *pp.a;
  const int64_t w = pp.w, ow = pp.ow;
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
  region(0, pp.y0, 0, ow);  // 1
  FlatLoop(b, out_buffer, out_plane, pp.y0 * w + pp.x0, (pp.y1 - 1) * w + pp.x1,
           [&](const Expr& p) {  // 2
             Expr combined;
             for (int64_t ky = 0; ky < a.kernel[0]; ++ky) {
               for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
                 const int64_t offset = (ky * a.dilation[0] - a.padding[0]) * w +
                                        kx * a.dilation[1] - a.padding[1];
                 Expr tap = g.Flatten(g.ValueOf(pp.pool->inputs[0],
                                                {n, c, b.Int(0), b.Add(p, b.Int(offset))}));
                 if (!combined) {
                   combined = tap;
                 } else {
                   combined = pp.average ? b.Add(combined, tap) : b.Max(combined, tap);
                 }
               }
             }
             if (!pp.average) return combined;
             return b.Div(combined, b.Constant(combined->type,
                                               static_cast<double>(a.kernel[0] * a.kernel[1])));
           },
           stages);
  region(pp.y0, pp.y1, 0, pp.x0);  // 3
  region(pp.y0, pp.y1, pp.x1, ow);
  region(pp.y1, pp.oh, 0, ow);  // 4
  return MakeSeq(std::move(stages));
}

// The separable form of a max pool (see the design note): the max over the
// window's rows into a plane of `rows` (a local buffer), then over its
// columns; each pass flat over the plane, with only the taps inside the
// input at its edges.
Stmt SeparableMax(GroupContext& g, const PoolPlane& pp, const std::vector<Var>& out_vars,
                  int out_buffer, std::vector<BufferDecl>& buffers) {
  te::ExprBuilder& b = g.b;
  const Pool2DAttrs& a = *pp.a;
  const int64_t w = pp.w, oh = pp.oh;
  const Expr n = b.Ref(out_vars[0]), c = b.Ref(out_vars[1]);
  const Expr out_plane = g.FlatIndex(pp.pool->type.shape, {n, c, b.Int(0), b.Int(0)});
  auto input = [&](const Expr& pos) {
    return g.Flatten(g.ValueOf(pp.pool->inputs[0], {n, c, b.Int(0), pos}));
  };
  const te::ScalarType type = input(b.Int(0))->type;
  const int rows = static_cast<int>(buffers.size());
  buffers.push_back({"rows", type, oh * w, /*local=*/true});
  g.shapes.push_back({oh * w});
  auto max_of = [&](const std::vector<Expr>& taps) {
    Expr m = taps[0];
    for (size_t i = 1; i < taps.size(); ++i) m = b.Max(m, taps[i]);
    return m;
  };
  std::vector<Stmt> stages;
  // Vertical: rows[y * W + x] = max over the window rows inside the input;
  // the interior rows flat, each edge row with its own taps.
  auto vertical = [&](int64_t y_lo, int64_t y_hi, bool interior) {
    FlatLoop(b, rows, b.Int(0), y_lo * w, y_hi * w, [&](const Expr& p) {
      std::vector<Expr> taps;
      for (int64_t ky = 0; ky < a.kernel[0]; ++ky) {
        const int64_t dy = ky * a.dilation[0] - a.padding[0];
        if (!interior) {
          const int64_t iy = y_lo + dy;  // an edge pass is one row
          if (iy < 0 || iy >= pp.h) continue;
        }
        taps.push_back(input(b.Add(p, b.Int(dy * w))));
      }
      return max_of(taps);
    }, stages);
  };
  for (int64_t y = 0; y < pp.y0; ++y) vertical(y, y + 1, false);
  vertical(pp.y0, pp.y1, true);
  for (int64_t y = pp.y1; y < oh; ++y) vertical(y, y + 1, false);
  // Horizontal: out = max over the window columns of `rows`, flat from
  // (0, x0) to (OH - 1, x1 - 1); then each edge column again with its own
  // taps, over every row.
  auto rows_at = [&](const Expr& pos) { return b.Load(rows, type, {pos}); };
  FlatLoop(b, out_buffer, out_plane, pp.x0, (oh - 1) * w + pp.x1, [&](const Expr& p) {
    std::vector<Expr> taps;
    for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
      taps.push_back(rows_at(b.Add(p, b.Int(kx * a.dilation[1] - a.padding[1]))));
    }
    return max_of(taps);
  }, stages);
  for (int64_t x = 0; x < pp.ow; ++x) {
    if (x == pp.x0) x = pp.x1;
    if (x >= pp.ow) break;
    Var y = b.NewVar("y", oh);
    const Expr p = b.Add(b.Mul(b.Ref(y), b.Int(w)), b.Int(x));
    std::vector<Expr> taps;
    for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
      const int64_t ix = x + kx * a.dilation[1] - a.padding[1];
      if (ix >= 0 && ix < w) taps.push_back(rows_at(b.Add(p, b.Int(ix - x))));
    }
    stages.push_back(
        MakeFor(y, ForKind::kSerial, MakeStore(out_buffer, b.Add(out_plane, p), max_of(taps))));
  }
  return MakeSeq(std::move(stages));
}

}  // namespace

Stmt FlatPlanePool(GroupContext& g, const std::vector<Var>& out_vars, int out_buffer,
                   const Expr& value, std::vector<BufferDecl>& buffers) {
  if (g.members.size() != 1 || out_vars.size() != 4) return nullptr;
  PoolPlane pp;
  pp.pool = g.members.back();
  pp.average = pp.pool->op->name == "avg_pool2d";
  if (!pp.average && pp.pool->op->name != "max_pool2d") return nullptr;
  if (!g.param_index.count(pp.pool->inputs[0])) return nullptr;
  const Pool2DAttrs& a = std::get<Pool2DAttrs>(pp.pool->attrs);
  pp.a = &a;
  if (a.strides[0] != 1 || a.strides[1] != 1) return nullptr;
  const std::vector<int64_t>& xs = pp.pool->inputs[0]->type.shape;
  const std::vector<int64_t>& os = pp.pool->type.shape;
  pp.h = xs[2], pp.w = xs[3], pp.oh = os[2], pp.ow = os[3];
  if (pp.ow != pp.w) return nullptr;
  // The interior: output rows [y0, y1) and columns [x0, x1) whose whole
  // window lies inside the input.
  pp.y0 = a.padding[0], pp.x0 = a.padding[1];
  pp.y1 = std::min(pp.oh, pp.h + a.padding[0] - a.dilation[0] * (a.kernel[0] - 1));
  pp.x1 = std::min(pp.ow, pp.w + a.padding[1] - a.dilation[1] * (a.kernel[1] - 1));
  if (pp.y1 <= pp.y0 || pp.x1 <= pp.x0) return nullptr;
  if ((pp.y1 - 1) * pp.w + pp.x1 - (pp.y0 * pp.w + pp.x0) < kMinInterior) return nullptr;
  // Every output's window must hold an input element, and the edges be few.
  if (pp.y0 > a.dilation[0] * (a.kernel[0] - 1) || pp.x0 > a.dilation[1] * (a.kernel[1] - 1) ||
      pp.oh - pp.y1 > a.dilation[0] * (a.kernel[0] - 1) ||
      pp.ow - pp.x1 > a.dilation[1] * (a.kernel[1] - 1)) {
    return nullptr;
  }

  Stmt body = !pp.average && pp.oh * pp.w <= kMaxSeparablePlane
                  ? SeparableMax(g, pp, out_vars, out_buffer, buffers)
                  : FlatWindow(g, pp, out_vars, out_buffer, value);
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
