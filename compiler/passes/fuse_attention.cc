// FuseAttention: softmax(q k^T * scale + mask) v, as PyTorch exports it,
// becomes one `attention` op (compiler/ops/attention_op.cc), run by the
// runtime's kiln_attention_f32, which never writes the score matrix.
//
//   q ... k^T                         the head split: slices of a fused QKV
//    \   /                            projection, reshapes and transposes
//    matmul                           (heads a leading batch dim), maybe a
//      | [mul / div by a scalar]*     scalar scale on q or k
//      | [add mask | where(c, -inf, .)]
//    softmax (last axis)
//      |    v
//    matmul          ->      attention(q base, k base, v base [, mask])
//
// 1. From each softmax over the last axis whose only reader is a matmul's
//    left operand, walk up the score chain: scalar multiplies and divides
//    multiply `scale`; one add of a float tensor, or a where choosing
//    -inf, is the mask (a where becomes the mask where(c, -inf, 0)); the
//    chain ends at the matmul q k^T. A scale met after the mask (walking
//    down) multiplies the mask too, so that the mask's coefficient is 1.
// 2. Views (ViewOf): each of q, k^T and v is traced up through transpose,
//    reshape, slice (positive steps) and scalar multiplies and divides (into
//    `scale`) to the tensor it reads, as offset plus, per dim, a list of
//    (size, stride) parts outer to inner: a reshape regroups the parts
//    (splitting one where a new dim ends inside it), so the head split of
//    a (S, B, 3E) projection is read in place. The mask is read as its
//    tensor is, broadcast.
// 3. Batch: the output's leading dims are N entries. Each operand's batch
//    parts (size-1 dims broadcast with stride 0), adjacent mergeable ones
//    merged, must split the entries at one common point at most, N = n1 x
//    n2 (batch x heads), which gives its strides s1 and s2. Rows must be one
//    part; q's, k's and v's last dim (the mask's keys) must have stride 1.
// 4. Output: a head merge after it (transposes and reshapes, attention's
//    only readers) becomes the op's output layout: the kernel writes its
//    rows where the merge would have put them, the merge's last node is
//    replaced, and the output projection reads a plain tensor (as a fused
//    transpose-reshape-dense it ran at 61% of the FMA peak, plain at 78%).
// Anything else leaves the graph as it is. Only where the host has
// AVX-512 (the kernel's scalar fallback is slow).
#include "compiler/passes/fuse_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "compiler/ir/constant_bytes.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"

namespace kiln {
namespace {

bool IsOp(const Node* n, const char* name) { return n->is_op() && n->op->name == name; }

// The value of a float constant with one element.
std::optional<double> ScalarConstant(const Node* n) {
  if (!n->is_constant() || n->type.NumElements() != 1 || !IsFloatDType(n->type.dtype)) {
    return std::nullopt;
  }
  return ReadElementAsDouble(n->type.dtype, n->value->bytes.data(), 0);
}

// x * c, c * x or x / c for a scalar constant c: x and the factor.
std::optional<std::pair<Node*, double>> ScalarScale(Node* n) {
  if (!(IsOp(n, "mul") || IsOp(n, "div")) || n->inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    if (IsOp(n, "div") && side == 0) continue;  // c / x is no scale
    const std::optional<double> c = ScalarConstant(n->inputs[side]);
    Node* x = n->inputs[1 - side];
    if (!c || x->type != n->type) continue;
    if (IsOp(n, "div")) {
      if (*c == 0) return std::nullopt;
      return std::make_pair(x, 1.0 / *c);
    }
    return std::make_pair(x, *c);
  }
  return std::nullopt;
}

// (size, stride) parts of one dim, outer to inner, sizes > 1 only.
using Parts = std::vector<std::pair<int64_t, int64_t>>;

struct View {
  Node* base = nullptr;
  int64_t offset = 0;
  std::vector<Parts> dims;
  double scale = 1;
};

View Contiguous(Node* n) {
  View v;
  v.base = n;
  const std::vector<int64_t>& shape = n->type.shape;
  v.dims.resize(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 1) v.dims[d].push_back({shape[d], stride});
    stride *= shape[d];
  }
  return v;
}

// The new dims of `shape` over the parts of every old dim in order, or
// nothing where a new dim would cut a part other than into factors.
std::optional<std::vector<Parts>> Regroup(const std::vector<Parts>& dims,
                                          const std::vector<int64_t>& shape) {
  Parts flat;
  for (const Parts& p : dims) flat.insert(flat.end(), p.begin(), p.end());
  std::vector<Parts> out(shape.size());
  size_t at = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t need = shape[d];
    while (need > 1) {
      if (at == flat.size()) return std::nullopt;
      auto [size, stride] = flat[at];
      if (need % size == 0) {
        out[d].push_back(flat[at++]);
        need /= size;
      } else if (size % need == 0) {  // the outer factor here, the rest for the next dim
        out[d].push_back({need, stride * (size / need)});
        flat[at] = {size / need, stride};
        need = 1;
      } else {
        return std::nullopt;
      }
    }
  }
  if (at != flat.size()) return std::nullopt;
  return out;
}

// Step 2.
View ViewOf(Node* n) {
  if (std::optional<std::pair<Node*, double>> s = ScalarScale(n)) {
    View v = ViewOf(s->first);
    v.scale *= s->second;
    return v;
  }
  if (IsOp(n, "transpose")) {
    View v = ViewOf(n->inputs[0]);
    std::vector<int64_t> perm = std::get<TransposeAttrs>(n->attrs).perm;
    const int64_t rank = static_cast<int64_t>(v.dims.size());
    if (perm.empty()) {
      for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    }
    std::vector<Parts> dims;
    for (int64_t p : perm) dims.push_back(v.dims[p < 0 ? p + rank : p]);
    v.dims = std::move(dims);
    return v;
  }
  if (IsOp(n, "reshape")) {
    View v = ViewOf(n->inputs[0]);
    if (std::optional<std::vector<Parts>> dims = Regroup(v.dims, n->type.shape)) {
      v.dims = std::move(*dims);
      return v;
    }
    return Contiguous(n);
  }
  if (IsOp(n, "slice")) {
    const SliceAttrs& a = std::get<SliceAttrs>(n->attrs);
    View v = ViewOf(n->inputs[0]);
    const std::vector<int64_t>& in = n->inputs[0]->type.shape;
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (a.starts[d] == 0 && a.steps[d] == 1 && a.sizes[d] == in[d]) continue;
      if (v.dims[d].size() != 1 || a.steps[d] < 1) return Contiguous(n);
      auto [size, stride] = v.dims[d][0];
      v.offset += a.starts[d] * stride;
      v.dims[d].clear();
      if (a.sizes[d] > 1) v.dims[d].push_back({a.sizes[d], stride * a.steps[d]});
    }
    return v;
  }
  return Contiguous(n);
}

// An operand's batch parts over the output's entries `batch` (its own batch
// dims right-aligned, missing and size-1 ones broadcast with stride 0),
// adjacent parts that step as one merged.
std::optional<Parts> EntryParts(const std::vector<Parts>& batch_dims,
                                const std::vector<int64_t>& batch) {
  if (batch_dims.size() > batch.size()) return std::nullopt;
  const size_t lead = batch.size() - batch_dims.size();
  Parts flat;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    const Parts* own = d >= lead ? &batch_dims[d - lead] : nullptr;
    if (own == nullptr || own->empty()) {
      flat.push_back({batch[d], 0});  // broadcast
      continue;
    }
    int64_t size = 1;
    for (const auto& p : *own) size *= p.first;
    if (size != batch[d]) return std::nullopt;
    flat.insert(flat.end(), own->begin(), own->end());
  }
  Parts merged;
  for (const auto& p : flat) {
    if (!merged.empty() && merged.back().second == p.second * p.first) {
      merged.back() = {merged.back().first * p.first, p.second};
    } else {
      merged.push_back(p);
    }
  }
  return merged;
}

// A dim's single stride: 0 for size 1, nothing for several parts.
std::optional<int64_t> SingleStride(const Parts& p) {
  if (p.empty()) return 0;
  if (p.size() != 1) return std::nullopt;
  return p[0].second;
}

struct Match {
  Node* softmax;
  Node* pv;  // softmax(...) v
  Node* qk;  // q k^T
  // The mask: an added tensor, or where(where_cond, -inf, 0) for a where
  // choosing -inf; times mask_scale (the scales after it) it joins q k^T *
  // scale as the graph has it (-inf times a negative scale is +inf there too).
  Node* mask = nullptr;
  double mask_scale = 1;
  Node* where_cond = nullptr;
  bool where_inf_first = true;  // where(c, -inf, x) rather than where(c, x, -inf)
  double scale = 1;
};

// Whether `n` is a matmul behind scalar scales: the scores' side of an add.
bool LeadsToMatmul(Node* n) {
  while (std::optional<std::pair<Node*, double>> s = ScalarScale(n)) n = s->first;
  return IsOp(n, "matmul");
}

bool IsMinusInf(const Node* n) {
  const std::optional<double> c = ScalarConstant(n);
  return c && std::isinf(*c) && *c < 0;
}

// Step 1.
std::optional<Match> MatchScores(Node* softmax,
                                 const std::unordered_map<const Node*, std::vector<Node*>>& readers,
                                 const std::unordered_map<const Node*, bool>& is_output) {
  Match m;
  m.softmax = softmax;
  const int64_t rank = softmax->type.rank();
  const int64_t axis = std::get<AxisAttrs>(softmax->attrs).axis;
  if (rank < 3 || (axis != -1 && axis != rank - 1) || softmax->type.dtype != DType::kFloat32 ||
      is_output.count(softmax)) {
    return std::nullopt;
  }
  auto it = readers.find(softmax);
  if (it == readers.end() || it->second.size() != 1) return std::nullopt;
  m.pv = it->second[0];
  if (!IsOp(m.pv, "matmul") || m.pv->inputs.size() != 2 || m.pv->inputs[0] != softmax ||
      m.pv->inputs[1] == softmax) {
    return std::nullopt;
  }
  Node* x = softmax->inputs[0];
  double after = 1;  // product of the scales between the mask and the softmax
  while (!IsOp(x, "matmul")) {
    if (std::optional<std::pair<Node*, double>> s = ScalarScale(x)) {
      after *= s->second;
      x = s->first;
      continue;
    }
    if (m.mask != nullptr || m.where_cond != nullptr) return std::nullopt;
    if (IsOp(x, "add") && x->inputs.size() == 2) {
      const int side = LeadsToMatmul(x->inputs[1]) && !LeadsToMatmul(x->inputs[0]) ? 1 : 0;
      Node* other = x->inputs[1 - side];
      if (x->inputs[side]->type != x->type || other->type.dtype != DType::kFloat32) {
        return std::nullopt;
      }
      m.mask = other;
      m.mask_scale = after;
      x = x->inputs[side];
      continue;
    }
    if (IsOp(x, "where") && x->inputs.size() == 3 && x->inputs[0]->type.dtype == DType::kBool) {
      const bool inf_first = IsMinusInf(x->inputs[1]);
      Node* scores = x->inputs[inf_first ? 2 : 1];
      if ((!inf_first && !IsMinusInf(x->inputs[2])) || scores->type != x->type) {
        return std::nullopt;
      }
      m.where_cond = x->inputs[0];
      m.where_inf_first = inf_first;
      m.mask_scale = after;
      x = scores;
      continue;
    }
    return std::nullopt;
  }
  if (x->inputs.size() != 2 || x->type.rank() < 3 || x->type.dtype != DType::kFloat32) {
    return std::nullopt;
  }
  m.qk = x;
  m.scale = after;
  return m;
}

std::shared_ptr<ConstantData> FloatScalar(float v) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, {}};
  std::string bytes(sizeof(float), '\0');
  std::memcpy(bytes.data(), &v, sizeof v);
  data->bytes = ConstantBytes(std::move(bytes));
  return data;
}

// Steps 2 and 3 for one operand whose logical dims are (batch..., rows,
// cols) of `view`, `transposed` swapping the last two (k^T): its
// AttentionView for entries `batch` split as n1 x n2, n2 = `split` (0: not
// decided yet, set by the first operand that needs a split; s1 = -1 marks
// an operand whose single part takes its s1 from the split later).
bool PlaceOperand(const View& v, bool transposed, const std::vector<int64_t>& batch, int64_t& split,
                  AttentionView& out) {
  if (v.dims.size() < 2) return false;
  const size_t r = v.dims.size();
  const Parts& rows = v.dims[transposed ? r - 1 : r - 2];
  const Parts& cols = v.dims[transposed ? r - 2 : r - 1];
  const std::optional<int64_t> row = SingleStride(rows);
  const std::optional<int64_t> col = SingleStride(cols);
  if (!row || !col || (!cols.empty() && *col != 1)) return false;
  const std::optional<Parts> parts =
      EntryParts(std::vector<Parts>(v.dims.begin(), v.dims.end() - 2), batch);
  if (!parts || parts->size() > 2) return false;
  out.offset = v.offset;
  out.row = *row;
  if (parts->size() == 2) {
    if (split != 0 && split != (*parts)[1].first) return false;
    split = (*parts)[1].first;
    out.s1 = (*parts)[0].second;
    out.s2 = (*parts)[1].second;
  } else if (parts->size() == 1) {
    out.s2 = (*parts)[0].second;
    out.s1 = -1;  // decided once the split is known
  } else {
    out.s1 = out.s2 = 0;
  }
  return true;
}

// Step 4. The output: when attention's only reader starts a chain of
// transposes and reshapes (the head merge before the output projection),
// the kernel writes each row where the chain's last node has it, and that
// node becomes the op. Sets a.out (and may move the split where every
// operand allows); returns the node replaced, `pv` itself when the output
// stays row-major.
Node* PlaceOutput(Node* pv, const std::unordered_map<const Node*, std::vector<Node*>>& readers,
                  const std::unordered_map<const Node*, bool>& is_output, AttentionAttrs& a) {
  a.out = {0, a.n2 * a.s * a.dv, a.s * a.dv, a.dv};
  Node* end = pv;
  for (;;) {
    auto it = readers.find(end);
    if (is_output.count(end) || it == readers.end() || it->second.size() != 1) break;
    Node* r = it->second[0];
    if (!IsOp(r, "transpose") && !IsOp(r, "reshape")) break;
    end = r;
  }
  if (end == pv) return pv;
  const View f = ViewOf(end);
  if (f.base != pv || f.offset != 0 || f.scale != 1) return pv;
  // Each part of the chain's dims: (size, stride in pv, stride in the chain's output).
  struct Part {
    int64_t size, from, to;
  };
  std::vector<Part> parts;
  for (const Parts& dim : f.dims) {
    for (const auto& [size, stride] : dim) parts.push_back({size, stride, 0});
  }
  int64_t to = 1;
  for (size_t i = parts.size(); i-- > 0;) {
    parts[i].to = to;
    to *= parts[i].size;
  }
  // pv's entries, rows and columns, by their strides in pv; each must be
  // (after merging what steps as one in both) at most two, one and one part.
  auto group = [&](int64_t lo, int64_t hi) {
    std::vector<Part> g;
    for (const Part& p : parts) {
      if (p.from >= lo && p.from < hi) g.push_back(p);
    }
    std::sort(g.begin(), g.end(), [](const Part& x, const Part& y) { return x.from > y.from; });
    std::vector<Part> merged;
    for (const Part& p : g) {
      if (!merged.empty() && merged.back().from == p.from * p.size &&
          merged.back().to == p.to * p.size) {
        merged.back() = {merged.back().size * p.size, p.from, p.to};
      } else {
        merged.push_back(p);
      }
    }
    return merged;
  };
  const std::vector<Part> entries = group(a.s * a.dv, std::numeric_limits<int64_t>::max());
  const std::vector<Part> rows = group(a.dv, a.s * a.dv);
  const std::vector<Part> cols = group(1, a.dv);
  if (entries.size() > 2 || rows.size() > 1 || cols.size() > 1 ||
      (!cols.empty() && cols[0].to != 1)) {
    return pv;
  }
  AttentionView out{0, 0, 0, rows.empty() ? 0 : rows[0].to};
  if (entries.size() == 2 && entries[1].size != a.n2) {
    // Another split: only where no operand needs this one.
    for (const AttentionView* v : {&a.q, &a.k, &a.v, &a.mask}) {
      if (v->s1 != v->s2 * a.n2) return pv;
    }
    const int64_t n = a.n1 * a.n2;
    a.n2 = entries[1].size;
    a.n1 = n / a.n2;
    for (AttentionView* v : {&a.q, &a.k, &a.v, &a.mask}) v->s1 = v->s2 * a.n2;
  }
  if (entries.size() == 2) {
    out.s1 = entries[0].to;
    out.s2 = entries[1].to;
  } else if (entries.size() == 1) {
    out.s2 = entries[0].to;
    out.s1 = out.s2 * a.n2;
  }
  a.out = out;
  a.out_shape = end->type.shape;
  return end;
}

bool HostHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

// The mask's view: its tensor as it is, right-aligned against the scores
// (batch..., S, T), size-1 dims broadcast; nothing if it does not broadcast
// or does not vary along the keys (a constant per row changes no softmax,
// but the kernel wants the keys contiguous).
std::optional<View> MaskView(const std::vector<int64_t>& shape,
                             const std::vector<int64_t>& scores) {
  const size_t rank = scores.size();
  if (shape.size() > rank || shape.empty() || shape.back() != scores.back()) return std::nullopt;
  const size_t lead = rank - shape.size();
  View v;
  v.dims.resize(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > lead;) {
    const int64_t size = shape[d - lead];
    if (size != 1 && size != scores[d]) return std::nullopt;
    if (size > 1) v.dims[d].push_back({size, stride});
    stride *= size;
  }
  return v;
}

absl::StatusOr<bool> FuseAttention(Graph& graph, bool host_has_avx512) {
  if (!host_has_avx512) return false;
  const OpRegistry& ops = OpRegistry::Default();
  std::unordered_map<const Node*, std::vector<Node*>> readers;
  for (Node* n : graph.AllNodes()) {
    for (Node* in : n->inputs) readers[in].push_back(n);
  }
  std::unordered_map<const Node*, bool> is_output;
  for (const Node* n : graph.outputs()) is_output[n] = true;
  bool changed = false;
  for (Node* softmax : graph.TopologicalOrder()) {
    if (!IsOp(softmax, "softmax")) continue;
    std::optional<Match> m = MatchScores(softmax, readers, is_output);
    if (!m) continue;
    const std::vector<int64_t>& out = m->pv->type.shape;
    const std::vector<int64_t>& scores = m->qk->type.shape;
    const size_t rank = out.size();
    // Batch and S agree.
    if (scores.size() != rank || !std::equal(out.begin(), out.end() - 1, scores.begin())) continue;
    const std::vector<int64_t> batch(out.begin(), out.end() - 2);
    AttentionAttrs a;
    a.s = out[rank - 2];
    a.dv = out[rank - 1];
    a.t = scores[rank - 1];
    a.d = m->qk->inputs[0]->type.shape.back();
    a.out_shape = out;
    const View q = ViewOf(m->qk->inputs[0]);
    const View kt = ViewOf(m->qk->inputs[1]);
    const View v = ViewOf(m->pv->inputs[1]);
    if (v.scale != 1) continue;  // a scaled v: left alone (rare)
    std::optional<View> mask_view;
    const bool has_mask = m->mask != nullptr || m->where_cond != nullptr;
    if (has_mask) {
      mask_view = MaskView((m->mask != nullptr ? m->mask : m->where_cond)->type.shape, scores);
      if (!mask_view) continue;
    }
    int64_t split = 0;
    if (!PlaceOperand(q, false, batch, split, a.q) || !PlaceOperand(kt, true, batch, split, a.k) ||
        !PlaceOperand(v, false, batch, split, a.v) ||
        (has_mask && !PlaceOperand(*mask_view, false, batch, split, a.mask))) {
      continue;
    }
    int64_t entries = 1;
    for (int64_t b : batch) entries *= b;
    if (split == 0) split = entries;
    a.n1 = entries / split;
    a.n2 = split;
    for (AttentionView* x : {&a.q, &a.k, &a.v, &a.mask}) {
      if (x->s1 == -1) x->s1 = x->s2 * split;  // one part over all entries
    }
    a.scale = static_cast<float>(m->scale * q.scale * kt.scale);
    std::vector<Node*> inputs{q.base, kt.base, v.base};
    const std::string& name = m->pv->name;
    if (has_mask) {
      Node* mask = m->mask;
      if (m->where_cond != nullptr) {
        Node* inf = graph.AddConstant(name + "/mask_inf",
                                      FloatScalar(-std::numeric_limits<float>::infinity()));
        Node* zero = graph.AddConstant(name + "/mask_zero", FloatScalar(0));
        Node* cond = m->where_cond;
        mask = m->where_inf_first
                   ? graph.AddOp(name + "/mask", ops.Find("where"), {cond, inf, zero}, NoAttrs{})
                   : graph.AddOp(name + "/mask", ops.Find("where"), {cond, zero, inf}, NoAttrs{});
      }
      if (m->mask_scale != 1) {
        Node* c =
            graph.AddConstant(name + "/mask_scale", FloatScalar(static_cast<float>(m->mask_scale)));
        mask = graph.AddOp(name + "/mask_scaled", ops.Find("mul"), {mask, c}, NoAttrs{});
      }
      inputs.push_back(mask);
    }
    Node* replaced = PlaceOutput(m->pv, readers, is_output, a);
    Node* att = graph.AddOp(name + "/attention", ops.Find("attention"), std::move(inputs), a);
    graph.ReplaceAllUses(replaced, att);
    changed = true;
  }
  if (!changed) return false;
  graph.RemoveDeadNodes();
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

class FuseAttentionPass final : public Pass {
 public:
  explicit FuseAttentionPass(bool host_has_avx512) : host_has_avx512_(host_has_avx512) {}
  const PassInfo& info() const override { return info_; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext&) override {
    return FuseAttention(graph, host_has_avx512_);
  }

 private:
  PassInfo info_{"FuseAttention", 2, {"InferType"}};
  bool host_has_avx512_;
};

}  // namespace

std::unique_ptr<Pass> CreateFuseAttentionPass() {
  return std::make_unique<FuseAttentionPass>(HostHasAvx512());
}

std::unique_ptr<Pass> CreateFuseAttentionPassForTest(bool host_has_avx512) {
  return std::make_unique<FuseAttentionPass>(host_has_avx512);
}

}  // namespace kiln
