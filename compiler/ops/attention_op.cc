// attention: softmax(q k^T * scale + mask) v in one op (compiler/passes/
// fuse_attention.cc makes it from MatMul, Softmax, MatMul). Lowering hands
// it to the runtime's kiln_attention_f32 (compiler/lower/attention_call.cc),
// which streams keys and values through an online softmax so the score
// matrix never goes to memory; the compute below states the same value for
// every other path (and for readers) with the scores recomputed per use.
//   inputs: q, k, v [, mask], float32 of any shape: each is read through its
//           AttentionAttrs view, so the head split's slices, reshapes and
//           transposes before it need no copy.
//   output: float32 out_shape, entry (a, b)'s row r at a * out.s1 + b *
//           out.s2 + r * out.row: (n1 * n2, s, dv) in row-major order, or as
//           the head merge after attention places them (the pass then makes
//           the merge's transpose and reshape this op).
// Pattern: opaque. The op is a call of a precompiled kernel, alone in its
// group; OutEWiseFusable would let an elementwise epilogue join the group
// and turn the call back into generated loops recomputing every score per
// output element. Its readers (the head merge before the output
// projection) fuse into that projection's operand instead.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

using te::ComputeContext;
using te::Expr;

absl::StatusOr<AttentionView> ParseView(const RawAttrs& raw, const char* name) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, GetIntsAttr(raw, name, {0, 0, 0, 0}));
  if (v.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention's ", name, " wants [offset, s1, s2, row]"));
  }
  return AttentionView{v[0], v[1], v[2], v[3]};
}

absl::StatusOr<Attrs> ParseAttention(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(
      raw, {"scale", "n", "s", "t", "d", "dv", "out_shape", "q", "k", "v", "mask", "out"}));
  AttentionAttrs a;
  KILN_ASSIGN_OR_RETURN(a.scale, GetFloatAttr(raw, "scale", 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> n, GetIntsAttr(raw, "n", {1, 1}));
  if (n.size() != 2) return absl::InvalidArgumentError("attention's n wants [n1, n2]");
  a.n1 = n[0];
  a.n2 = n[1];
  KILN_ASSIGN_OR_RETURN(a.s, GetIntAttr(raw, "s", 1));
  KILN_ASSIGN_OR_RETURN(a.t, GetIntAttr(raw, "t", 1));
  KILN_ASSIGN_OR_RETURN(a.d, GetIntAttr(raw, "d", 1));
  KILN_ASSIGN_OR_RETURN(a.dv, GetIntAttr(raw, "dv", 1));
  KILN_ASSIGN_OR_RETURN(a.out_shape, GetIntsAttr(raw, "out_shape", {}));
  KILN_ASSIGN_OR_RETURN(a.q, ParseView(raw, "q"));
  KILN_ASSIGN_OR_RETURN(a.k, ParseView(raw, "k"));
  KILN_ASSIGN_OR_RETURN(a.v, ParseView(raw, "v"));
  KILN_ASSIGN_OR_RETURN(a.mask, ParseView(raw, "mask"));
  a.out = {0, a.n2 * a.s * a.dv, a.s * a.dv, a.dv};  // row-major unless given
  if (HasAttr(raw, "out")) {
    KILN_ASSIGN_OR_RETURN(a.out, ParseView(raw, "out"));
  }
  return Attrs(a);
}

// The output's (size, stride) pairs for n1, n2, rows and columns, sizes
// above 1 only, largest stride first.
std::vector<std::pair<int64_t, int64_t>> OutputDims(const AttentionAttrs& a) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (auto [size, stride] : {std::pair{a.n1, a.out.s1}, std::pair{a.n2, a.out.s2},
                              std::pair{a.s, a.out.row}, std::pair{a.dv, int64_t{1}}}) {
    if (size > 1) dims.push_back({size, stride});
  }
  std::sort(dims.begin(), dims.end(),
            [](const auto& x, const auto& y) { return x.second > y.second; });
  return dims;
}

// The largest element index `view` reaches with rows of `cols` elements.
int64_t LastElement(const AttentionAttrs& a, const AttentionView& v, int64_t rows, int64_t cols) {
  return v.offset + (a.n1 - 1) * v.s1 + (a.n2 - 1) * v.s2 + (rows - 1) * v.row + cols - 1;
}

absl::StatusOr<TensorType> AttentionRelation(const std::vector<TensorType>& in,
                                             const Attrs& attrs) {
  const AttentionAttrs& a = std::get<AttentionAttrs>(attrs);
  for (const TensorType& x : in) {
    if (x.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention wants float32 operands, got ", x.ToString()));
    }
  }
  if (a.n1 < 1 || a.n2 < 1 || a.s < 1 || a.t < 1 || a.d < 1 || a.dv < 1) {
    return absl::InvalidArgumentError("attention's n, s, t, d and dv must be >= 1");
  }
  struct Operand {
    const AttentionView& view;
    int64_t rows, cols;
    const char* name;
  };
  std::vector<Operand> operands{{a.q, a.s, a.d, "q"}, {a.k, a.t, a.d, "k"}, {a.v, a.t, a.dv, "v"}};
  if (in.size() == 4) operands.push_back({a.mask, a.s, a.t, "mask"});
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    if (o.view.offset < 0 || o.view.s1 < 0 || o.view.s2 < 0 || o.view.row < 0 ||
        LastElement(a, o.view, o.rows, o.cols) >= in[i].NumElements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention's view of ", o.name, " leaves its input ", in[i].ToString()));
    }
  }
  const int64_t elements = std::accumulate(a.out_shape.begin(), a.out_shape.end(), int64_t{1},
                                           [](int64_t x, int64_t y) { return x * y; });
  if (elements != a.n1 * a.n2 * a.s * a.dv) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention's out_shape [", absl::StrJoin(a.out_shape, ","), "] does not hold ",
                     a.n1 * a.n2, " entries of ", a.s, " x ", a.dv));
  }
  // Every output element once: the strides, largest first, step by the
  // sizes inside them.
  int64_t inner = 1;
  const auto dims = OutputDims(a);
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i].second != inner) {
      return absl::InvalidArgumentError("attention's out view does not cover its output once");
    }
    inner *= dims[i].first;
  }
  if (a.out.offset != 0) return absl::InvalidArgumentError("attention's out view has an offset");
  return TensorType{DType::kFloat32, a.out_shape};
}

// Input `i`'s element at flat index `flat`, unravelled into its shape.
Expr ElementAt(ComputeContext& ctx, int i, Expr flat) {
  te::ExprBuilder& b = ctx.b();
  const std::vector<int64_t>& shape = ctx.input_type(i).shape;
  std::vector<Expr> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = d == 0 ? flat : b.Mod(flat, b.Int(shape[d]));
    if (d > 0) flat = b.Div(flat, b.Int(shape[d]));
  }
  return ctx.Input(i, idx);
}

Expr AttentionCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  const AttentionAttrs& a = ctx.attrs<AttentionAttrs>();
  const std::vector<Expr>& o = ctx.out();
  // The element's flat index, then its entry, row and column: each is the
  // flat index over its stride, modulo its size (the out view is a
  // permutation of dense dims).
  const std::vector<int64_t>& shape = a.out_shape;
  Expr flat = b.Int(0);
  for (size_t d = 0; d < shape.size(); ++d) flat = b.Add(b.Mul(flat, b.Int(shape[d])), o[d]);
  auto digit = [&](int64_t size, int64_t stride) {
    return size == 1 ? b.Int(0) : b.Mod(b.Div(flat, b.Int(stride)), b.Int(size));
  };
  const Expr n1 = digit(a.n1, a.out.s1), n2 = digit(a.n2, a.out.s2);
  const Expr row = digit(a.s, a.out.row), col = digit(a.dv, 1);
  auto element = [&](int input, const AttentionView& v, Expr r, Expr c) {
    Expr flat = b.Add(b.Int(v.offset), b.Add(b.Mul(n1, b.Int(v.s1)), b.Mul(n2, b.Int(v.s2))));
    flat = b.Add(flat, b.Add(b.Mul(r, b.Int(v.row)), c));
    return ElementAt(ctx, input, flat);
  };
  auto score = [&](const te::Var& t) {
    te::Var k = ctx.ReduceVar("k", a.d);
    Expr dot = b.Reduce(te::ReduceOp::kSum, {k},
                        b.Mul(element(0, a.q, row, b.Ref(k)), element(1, a.k, b.Ref(t), b.Ref(k))));
    Expr x = b.Mul(dot, b.Float(a.scale));
    if (ctx.num_inputs() == 4) x = b.Add(x, element(3, a.mask, row, b.Ref(t)));
    return x;
  };
  te::Var tm = ctx.ReduceVar("tm", a.t);
  Expr max = b.Reduce(te::ReduceOp::kMax, {tm}, score(tm));
  // As the kernel: a row of -inf everywhere is shifted by 0, and ends 0 / 0.
  const Expr shift =
      b.Select(b.Compare(te::CompareOp::kEQ, max, b.Float(-INFINITY)), b.Float(0), max);
  te::Var ts = ctx.ReduceVar("ts", a.t);
  Expr sum =
      b.Reduce(te::ReduceOp::kSum, {ts}, b.Unary(te::UnaryOp::kExp, b.Sub(score(ts), shift)));
  te::Var tv = ctx.ReduceVar("tv", a.t);
  Expr weighted = b.Reduce(
      te::ReduceOp::kSum, {tv},
      b.Mul(b.Unary(te::UnaryOp::kExp, b.Sub(score(tv), shift)), element(2, a.v, b.Ref(tv), col)));
  return b.Div(weighted, sum);
}

}  // namespace

void RegisterAttentionOp(OpRegistry& r) {
  OpDef def;
  def.name = "attention";
  def.pattern = OpPattern::kOpaque;
  def.min_inputs = 3;
  def.max_inputs = 4;
  def.summary = "softmax(q k^T * scale + mask) v over strided views of q, k, v and the mask";
  def.parse_attrs = ParseAttention;
  def.infer_type = AttentionRelation;
  def.compute = AttentionCompute;
  def.flops = [](const std::vector<TensorType>&, const TensorType&, const Attrs& attrs) {
    const AttentionAttrs& a = std::get<AttentionAttrs>(attrs);
    const double rows = static_cast<double>(a.n1 * a.n2 * a.s * a.t);
    return 2.0 * rows * static_cast<double>(a.d + a.dv);
  };
  r.Register(std::move(def));
}

}  // namespace kiln
