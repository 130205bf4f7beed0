#include "compiler/lower/plane_prefetch.h"

#include <functional>

#include "common/int_math.h"
#include "compiler/ir/op_def.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::Var;

// The smallest input plane (elements) a depthwise conv or a pool prefetches
// the next of.
constexpr int64_t kMinPrefetchPlane = 2048;

}  // namespace

// `rows`, a depthwise conv's (or a pool's) loop over the output rows of
// channel `c` of image `n`, with prefetches spread over its iterations for
// the input plane the thread reads next (channel c + 1, or the next
// image's first). A depthwise conv's fill reads a plane at a time and then
// computes from L1, so without them memory sits idle while the rows run
// and the next fill waits on it (mobilenet_v2 b8, 1 thread: the stride-2
// conv on 112 x 112 planes went from 3.9-4.0 to 2.9-3.7 ms, on 56 x 56
// from 0.84 to 0.72). Only where the input is a parameter, read as it is,
// and its planes are large: planes of 28 x 28 and less came from L2 anyway
// and ran up to 15% slower.
Stmt PrefetchNextPlane(GroupContext& g, const Node* op, const Expr& n, const Expr& c,
                       const Stmt& rows) {
  te::ExprBuilder& b = g.b;
  const std::vector<int64_t>& xs = op->inputs[0]->type.shape;
  const int64_t plane = xs[2] * xs[3];
  auto param = g.param_index.find(op->inputs[0]);
  if (param == g.param_index.end() || rows->kind != StmtKind::kFor || rows->var->extent < 2 ||
      plane < kMinPrefetchPlane) {
    return rows;
  }
  constexpr int64_t kLineFloats = 16;
  const int64_t lines = CeilDiv(plane, kLineFloats);
  const int64_t per_row = CeilDiv(lines, rows->var->extent);
  Var line = b.NewVar("line", per_row);
  Expr next = b.Add(b.Add(b.Mul(n, b.Int(xs[1])), c), b.Int(1));
  Expr offset = b.Mul(b.Add(b.Mul(b.Ref(rows->var), b.Int(per_row)), b.Ref(line)),
                       b.Int(kLineFloats));
  Stmt prefetch =
      MakeFor(line, ForKind::kSerial,
              MakePrefetch(param->second, b.Add(b.Mul(next, b.Int(plane)), offset)));
  return MakeFor(rows->var, rows->for_kind, MakeSeq({prefetch, rows->children[0]}));
}

// `nest` (the output's loop nest) with the rows of each output plane
// prefetching the next input plane, when the group is one pooling op over
// a parameter with planes of at least kMinPrefetchPlane elements. A pool
// reads each input plane once, in order, a few short rows at a time, and
// so waits on memory the way depthwise convs did (see PrefetchNextPlane).
// resnet18's 3x3 stride-2 pool at batch 8: alone at 1 thread, 2.35-2.50
// -> 1.74-1.94 ms; in the model at 2 threads, 2.18-2.31 -> 1.36-1.39 ms.
Stmt PrefetchNextPoolPlane(GroupContext& g, const std::vector<Var>& out_vars, const Stmt& nest) {
  te::ExprBuilder& b = g.b;
  const Node* pool = g.members.back();
  if (pool->op->name != "max_pool2d" && pool->op->name != "avg_pool2d") return nest;
  if (out_vars.size() != 4 || out_vars[1]->extent < 2) return nest;
  // The loops over image and channel, down to the loop over output rows.
  std::function<Stmt(const Stmt&)> rewrite = [&](const Stmt& s) -> Stmt {
    if (s->kind != StmtKind::kFor) return s;
    if (s->var == out_vars[2]) {
      return PrefetchNextPlane(g, pool, b.Ref(out_vars[0]), b.Ref(out_vars[1]), s);
    }
    if (s->var != out_vars[0] && s->var != out_vars[1]) return s;
    return MakeFor(s->var, s->for_kind, rewrite(s->children[0]));
  };
  return rewrite(nest);
}

}  // namespace kiln::lower
