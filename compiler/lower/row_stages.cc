// Row stages: step 5 of lowering (lower_group.cc) for a group whose hoisted
// reductions are all values of an output row, LayerNorm's mean and variance
// or softmax's max and sum: each temporary depends on every output loop but
// the innermost x, and the main value holds no reduction. Then one nest over
// the rows computes, for each row, its temporaries in order (the variance
// reads the mean; the sum of exps reads the max) and then the row's outputs
// in a vectorised x loop:
//
//   parallel for i:             instead of   for i: t0[i] = sum(row i)
//     t0[i] = sum(row i)                     for i: t1[i] = sum(f(row i, t0[i]))
//     t1[i] = sum(f(row i, t0[i]))           parallel for i, x: out = g(...)
//     vectorized for x: out[i, x] = g(row i, t0[i], t1[i])
//
// so a row comes from memory once and the later passes over it hit L1 (a
// 768-float row is 3 KiB). What the last value's pass and the output's pass
// both compute (softmax's exp(x - max), LayerNorm's x - mean) goes into a
// row of thread-local scratch between them, computed once instead of twice.
// A row may span several trailing loops (an InstanceNorm's mean and variance
// per image plane: the row is the plane; [1, 64, 56, 56] on 2 threads 0.29
// -> 0.20 ms, its statistics no longer on one thread). A row value whose
// reduction reads a column instead keeps its own nest, where
// row_reduction.cc can turn it inside out.
// transformer (4 layers, d256, seq 128) at batch 8: its 8 LayerNorms 2.0 ->
// 1.2 ms (summed kernel medians, before as two kernels each).
#include "compiler/lower/row_stages.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <unordered_set>

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

bool ContainsReduce(const Expr& e) {
  std::unordered_set<const te::ExprNode*> seen;
  std::vector<const te::ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const te::ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->kind == ExprKind::kReduce) return true;
    for (const Expr& o : n->operands) stack.push_back(o.get());
  }
  return false;
}

// Every variable `e` refers to.
std::vector<Var> VarsIn(const Expr& e) {
  std::vector<Var> vars;
  std::unordered_set<const te::ExprNode*> seen;
  std::unordered_set<const te::VarNode*> found;
  std::vector<const te::ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const te::ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->kind == ExprKind::kVar && found.insert(n->var.get()).second) vars.push_back(n->var);
    for (const Expr& o : n->operands) stack.push_back(o.get());
  }
  return vars;
}

// Whether reduction `r` (loads flattened) reads memory in order along its
// innermost variable: each load's element index steps by at most one as
// that variable does, the others held at 0.
bool ReadsInOrder(te::ExprBuilder& b, const Expr& r) {
  if (r->kind != ExprKind::kReduce || r->reduce_vars.empty()) return false;
  const Expr& body = r->operands[0];
  const std::vector<Var> vars = VarsIn(body);
  std::vector<Expr> here(vars.size(), b.Int(0)), next = here;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i] == r->reduce_vars.back()) next[i] = b.Int(1);
  }
  std::unordered_set<const te::ExprNode*> seen;
  std::vector<const te::ExprNode*> stack{body.get()};
  while (!stack.empty()) {
    const te::ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    for (const Expr& o : n->operands) stack.push_back(o.get());
    if (n->kind != ExprKind::kLoad) continue;
    const Expr a = b.Substitute(n->operands[0], vars, here);
    const Expr c = b.Substitute(n->operands[0], vars, next);
    if (a->kind != ExprKind::kIntImm || c->kind != ExprKind::kIntImm ||
        std::abs(c->int_value - a->int_value) > 1) {
      return false;
    }
  }
  return true;
}

// Every node of `e`.
std::unordered_set<const te::ExprNode*> NodesOf(const Expr& e) {
  std::unordered_set<const te::ExprNode*> nodes;
  std::vector<const te::ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const te::ExprNode* n = stack.back();
    stack.pop_back();
    if (!nodes.insert(n).second) continue;
    for (const Expr& o : n->operands) stack.push_back(o.get());
  }
  return nodes;
}

// The largest computed part (not a bare load) of reduction `r`'s body that
// varies along r's variable s and that `value` holds too with x for s: what
// both passes over the row compute (softmax's exp(x - max), LayerNorm's
// x - mean). Null when there is none or `r` is not one pass over a row of x.
Expr SharedRowPart(GroupContext& g, const Expr& r, const Var& x, const Expr& value) {
  if (r->reduce_vars.size() != 1 || r->reduce_vars[0]->extent != x->extent) return nullptr;
  const Var& s = r->reduce_vars[0];
  const std::unordered_set<const te::ExprNode*> in_value = NodesOf(value);
  std::unordered_set<const te::ExprNode*> seen;
  std::vector<Expr> level{r->operands[0]};  // breadth first: larger parts first
  while (!level.empty()) {
    std::vector<Expr> next;
    for (const Expr& part : level) {
      if (!seen.insert(part.get()).second || part->kind == ExprKind::kLoad ||
          !g.FreeVars(part).count(s.get())) {
        continue;
      }
      if (in_value.count(g.b.Substitute(part, {s}, {g.b.Ref(x)}).get())) return part;
      next.insert(next.end(), part->operands.begin(), part->operands.end());
    }
    level = std::move(next);
  }
  return nullptr;
}

}  // namespace

Stmt RowStages(GroupContext& g, const std::vector<Var>& out_vars, int out_buffer,
               const std::vector<HoistedTemp>& temps, int first_temp, const Expr& value,
               std::vector<BufferDecl>& buffers) {
  te::ExprBuilder& b = g.b;
  std::vector<Var> loops;
  for (const Var& v : out_vars) {
    if (v->extent != 1) loops.push_back(v);
  }
  if (temps.empty() || loops.size() < 2 || ContainsReduce(value)) return nullptr;
  // The rows: the leading loops the temporaries depend on (all but the
  // innermost for LayerNorm and softmax; all but the last two for an
  // InstanceNorm's planes). The loops after them run over one row.
  std::vector<Var> rows;
  for (const Var& v : temps[0].vars) {
    if (v->extent != 1) rows.push_back(v);
  }
  if (rows.empty() || rows.size() >= loops.size() ||
      !std::equal(rows.begin(), rows.end(), loops.begin())) {
    return nullptr;
  }
  const std::vector<Var> inner(loops.begin() + static_cast<std::ptrdiff_t>(rows.size()),
                               loops.end());
  const Var& x = loops.back();
  int64_t num_rows = 1, row_length = 1;
  for (const Var& v : rows) num_rows *= v->extent;
  for (const Var& v : inner) row_length *= v->extent;
  std::vector<Stmt> per_row;
  int64_t work = num_rows * row_length;
  for (size_t t = 0; t < temps.size(); ++t) {
    std::vector<Var> looped;
    std::vector<int64_t> shape;
    std::vector<Expr> idx;
    for (const Var& v : temps[t].vars) {
      if (v->extent != 1) looped.push_back(v);
      shape.push_back(v->extent);
      idx.push_back(b.Ref(v));
    }
    if (looped != rows) return nullptr;
    Expr flat = g.Flatten(temps[t].value);
    if (!ReadsInOrder(b, flat)) return nullptr;
    for (const Var& v : flat->reduce_vars) work += num_rows * v->extent;
    per_row.push_back(
        MakeStore(first_temp + static_cast<int>(t), g.FlatIndex(shape, idx), std::move(flat)));
  }
  Expr out_value = g.Flatten(value);
  // What the last row value's pass and the output's pass both compute is
  // computed once, into a row of L1 scratch: softmax's exp per element once
  // instead of twice (transformer: its 4 softmaxes 0.22 -> 0.16 ms at batch
  // 1, 1.9 -> 1.4 ms at batch 8, summed kernel medians).
  Stmt& last = per_row.back();
  Expr part = inner.size() == 1 ? SharedRowPart(g, last->value, x, out_value) : nullptr;
  if (part) {
    const int row = static_cast<int>(buffers.size());
    buffers.push_back({"row", part->type, x->extent, /*local=*/true});
    const Var& s = last->value->reduce_vars[0];
    const Expr at_x = b.Substitute(part, {s}, {b.Ref(x)});
    Stmt fill = MakeFor(x, ForKind::kVectorized, MakeStore(row, b.Ref(x), at_x));
    last = MakeStore(last->buffer, last->index,
                     b.Replace(last->value, part, b.Load(row, part->type, {b.Ref(s)})));
    per_row.insert(per_row.end() - 1, std::move(fill));
    out_value = b.Replace(out_value, at_x, b.Load(row, part->type, {b.Ref(x)}));
  }
  std::vector<Expr> idx;
  for (const Var& v : out_vars) idx.push_back(b.Ref(v));
  Stmt row_out = MakeStore(out_buffer, g.FlatIndex(g.shapes[out_buffer], idx), out_value);
  for (auto v = inner.rbegin(); v != inner.rend(); ++v) {
    row_out = MakeFor(*v, *v == x ? ForKind::kVectorized : ForKind::kSerial, row_out);
  }
  per_row.push_back(std::move(row_out));
  Stmt body = MakeSeq(std::move(per_row));
  for (int d = static_cast<int>(rows.size()) - 1; d >= 0; --d) {
    const bool parallel = d == 0 && work >= kParallelWorkThreshold;
    body = MakeFor(rows[d], parallel ? ForKind::kParallel : ForKind::kSerial, body);
  }
  return body;
}

}  // namespace kiln::lower
