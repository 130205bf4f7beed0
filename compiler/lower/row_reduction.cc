// The inside-out reduction (TVM's rfactor turned sideways, for CPUs): when an
// output element holds a reduction that reads memory contiguously (or not at
// all) along the innermost output dim x — conv2d along the output row,
// matmul along N — a thread-local row of accumulators acc[x] is
// initialised, then for each reduction step a vectorised x loop updates the
// whole row, then the epilogue reads acc[x]. The x loop is then long,
// unit-stride and vectorisable, where the reduction loop itself (a 3-wide
// kernel window, a channel stride) is not. Short strided windows (pools) are
// unrolled inside the x loop instead.
#include "compiler/lower/row_reduction.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

// How the loops over a row of `extent` accumulators of `type` run. A row
// of at most four 64-byte vectors is written as vector values (kVector),
// whose accumulators SROA keeps in registers. Left to LLVM's vectoriser, a
// one-vector row became a loop of one iteration that the kernel pipeline
// (no unroller) keeps, so the row stayed in memory and every step of the
// reduction was a load, an add and a store: a blocked global average pool
// (16 lanes over 196 pixels) ran at 19-22 GB/s, 0.024 ms for 672 channels
// (mobilenet_v3_large, AMD EPYC Zen 5).
int64_t RowBytes(int64_t extent, te::ScalarType type) {
  return extent * (type == te::ScalarType::kBool ? 1 : type == te::ScalarType::kF32 ? 4 : 8);
}

ForKind RowLoopKind(int64_t extent, te::ScalarType type) {
  const int64_t bytes = RowBytes(extent, type);
  return bytes % 32 == 0 && bytes <= 256 ? ForKind::kVector : ForKind::kVectorized;
}

// How an unrolled short window's row loop runs: a row of exactly one 64-byte
// vector (the 16 lanes of a blocked pool's pixel) as a vector value; left to
// LLVM's vectoriser each pixel was a loop of one iteration behind a runtime
// alias check, with a scalar copy of the window beside it.
ForKind OneVectorRowKind(int64_t extent, te::ScalarType type) {
  return RowBytes(extent, type) == 64 ? ForKind::kVector : ForKind::kVectorized;
}

class RowReducer {
 public:
  explicit RowReducer(GroupContext& g) : g_(g), b_(g.b) {}

  // The one reduction in `value` (outside other reductions' bodies) that
  // depends on `x`, when there is exactly one and it nests no reduction.
  Expr RowReduction(const Expr& value, const te::VarNode* x) {
    std::vector<Expr> found;
    std::unordered_set<const te::ExprNode*> seen;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!seen.insert(e.get()).second) return;
      if (e->kind == ExprKind::kReduce) {
        if (g_.FreeVars(e).count(x)) found.push_back(e);
        return;
      }
      for (const Expr& o : e->operands) visit(o);
    };
    visit(value);
    if (found.size() != 1) return nullptr;
    std::unordered_set<const te::ExprNode*> inner;
    bool nested = false;
    std::function<void(const Expr&)> check = [&](const Expr& e) {
      if (!inner.insert(e.get()).second) return;
      nested |= e->kind == ExprKind::kReduce;
      for (const Expr& o : e->operands) check(o);
    };
    check(found[0]->operands[0]);
    return nested ? nullptr : found[0];
  }

  // The largest step of a load index in `body` as `x` goes from `at` to
  // `at` + 1 with the other `vars` at 0, or nullopt when some index does not
  // fold to a constant there.
  std::optional<int64_t> LoadStep(const Expr& body, const Var& x, const std::vector<Var>& vars,
                                  int64_t at) {
    std::vector<Expr> here(vars.size(), b_.Int(0)), next = here;
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i] == x) {
        here[i] = b_.Int(at);
        next[i] = b_.Int(at + 1);
      }
    }
    std::unordered_set<const te::ExprNode*> seen;
    std::optional<int64_t> step = 0;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!step || !seen.insert(e.get()).second) return;
      if (e->kind == ExprKind::kLoad) {
        Expr a = b_.Substitute(e->operands[0], vars, here);
        Expr b = b_.Substitute(e->operands[0], vars, next);
        if (a->kind != ExprKind::kIntImm || b->kind != ExprKind::kIntImm) {
          step.reset();
          return;
        }
        step = std::max(*step, std::abs(b->int_value - a->int_value));
      }
      for (const Expr& o : e->operands) visit(o);
    };
    visit(body);
    return step;
  }

  // The inside-out reduction (see the design note) for innermost loop `x`, or
  // null when it does not apply.
  Stmt RowAccumulated(const std::vector<Var>& loops, int buffer, const Expr& store_index,
                      const Expr& value, std::vector<BufferDecl>& buffers) {
    constexpr int64_t kMaxRow = 4096;
    const Var& x = loops.back();
    if (x->extent < 4 || x->extent > kMaxRow) return nullptr;
    Expr r = RowReduction(value, x.get());
    if (r == nullptr) return nullptr;
    std::vector<Var> vars = loops;
    vars.insert(vars.end(), r->reduce_vars.begin(), r->reduce_vars.end());
    // Loads that step by one or two elements along x (a stride-2 pool too).
    const std::optional<int64_t> step = LoadStep(r->operands[0], x, vars, 0);
    if (!step || *step > 2) return nullptr;
    const Expr body = r->operands[0];
    // A strided row (a stride-2 pool) with a short innermost window: that
    // window is unrolled inside the vector loop, so the loads of one
    // iteration cover every phase of the stride and LLVM's vectoriser can
    // load them as wide interleaved groups instead of one gather per load
    // (resnet18's 3x3 stride-2 max pool: 0.90 -> 0.35 ms, 55 gathers -> 7).
    // (The step is taken at x = 2, clear of the clamps a padded window puts
    // at 0.)
    std::vector<Var> serial = r->reduce_vars;
    const bool short_window = !serial.empty() && serial.back()->extent <= 4;
    const bool strided_window = short_window && LoadStep(body, x, vars, 2).value_or(0) > 1;
    // A whole short window of at most 16 elements is unrolled and the row
    // computed in one pass, with no row of accumulators to initialise,
    // update once per window row and copy out (resnet18's pool: 0.32 ->
    // 0.20-0.27 ms, with BlockStridedVectorLoops), strided or not
    // (googlenet's 3x3 stride-1 max pools on 28x28 and 14x14 planes ran at
    // 1.6-4.7 GB/s through the row of accumulators, a memory round trip per
    // window element for a row of one or two vectors).
    int64_t window_size = 1;
    for (const Var& v : serial) window_size *= v->extent;
    if (short_window && window_size <= 16) {
      return MakeFor(
          x, OneVectorRowKind(x->extent, r->type),
          MakeStore(buffer, store_index,
                    b_.Replace(value, r, CombineAll(r->reduce_op(), UnrollWindow(body, serial)))));
    }
    const int acc = static_cast<int>(buffers.size());
    buffers.push_back({absl::StrCat("acc", acc), r->type, x->extent, /*local=*/true});
    Expr slot = b_.Load(acc, r->type, {b_.Ref(x)});
    Expr combined = Combine(r->reduce_op(), slot, body);
    Expr init;
    switch (r->reduce_op()) {
      case te::ReduceOp::kSum:
        init = b_.Constant(r->type, 0);
        break;
      case te::ReduceOp::kProd:
        init = b_.Constant(r->type, 1);
        break;
      case te::ReduceOp::kMax:
        init = te::IsFloat(r->type) ? b_.Constant(r->type, -INFINITY)
                                    : b_.Int(std::numeric_limits<int64_t>::min());
        break;
      case te::ReduceOp::kMin:
        init = te::IsFloat(r->type) ? b_.Constant(r->type, INFINITY)
                                    : b_.Int(std::numeric_limits<int64_t>::max());
        break;
    }
    if (strided_window) {
      const Var window = serial.back();
      serial.pop_back();
      std::vector<Expr> terms = UnrollWindow(body, {window});
      terms.insert(terms.begin(), slot);
      combined = CombineAll(r->reduce_op(), terms);
    }
    const ForKind row = RowLoopKind(x->extent, r->type);
    Stmt update = MakeFor(x, row, MakeStore(acc, b_.Ref(x), combined));
    for (auto it = serial.rbegin(); it != serial.rend(); ++it) {
      update = MakeFor(*it, ForKind::kSerial, update);
    }
    return MakeSeq({MakeFor(x, row, MakeStore(acc, b_.Ref(x), init)), update,
                    MakeFor(x, row, MakeStore(buffer, store_index, b_.Replace(value, r, slot)))});
  }

  // `body` at every point of the window `vars`, each bound to a constant.
  std::vector<Expr> UnrollWindow(const Expr& body, const std::vector<Var>& vars) {
    std::vector<Expr> terms{body};
    for (const Var& v : vars) {
      std::vector<Expr> next;
      for (const Expr& t : terms) {
        for (int64_t j = 0; j < v->extent; ++j) next.push_back(b_.Substitute(t, {v}, {b_.Int(j)}));
      }
      terms = std::move(next);
    }
    return terms;
  }

  // terms[0] combined with each of the others in turn.
  Expr CombineAll(te::ReduceOp op, const std::vector<Expr>& terms) {
    Expr combined = terms[0];
    for (size_t j = 1; j < terms.size(); ++j) combined = Combine(op, combined, terms[j]);
    return combined;
  }

  Expr Combine(te::ReduceOp op, const Expr& a, const Expr& b) {
    switch (op) {
      case te::ReduceOp::kSum:
        return b_.Add(a, b);
      case te::ReduceOp::kProd:
        return b_.Mul(a, b);
      case te::ReduceOp::kMax:
        return b_.Max(a, b);
      case te::ReduceOp::kMin:
        return b_.Min(a, b);
    }
    return a;
  }
 private:
  GroupContext& g_;
  te::ExprBuilder& b_;
};

}  // namespace

Stmt RowAccumulated(GroupContext& g, const std::vector<te::Var>& loops, int buffer,
                    const te::Expr& store_index, const te::Expr& value,
                    std::vector<BufferDecl>& buffers) {
  return RowReducer(g).RowAccumulated(loops, buffer, store_index, value, buffers);
}

}  // namespace kiln::lower
