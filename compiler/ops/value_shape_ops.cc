// Ops whose output shape depends on their input's values: nonzero (ONNX
// NonZero, and Compress's positions) and unique (ONNX Unique).
//
// Design note: where the count comes from.
//
// * TVM. Relay types such an op's output with an `Any` dim and registers a
//   data-dependent shape function (argwhere, unique): the VM runs it on the
//   input's value, allocates the output, runs the kernel, and every kernel
//   downstream is compiled for symbolic extents. Relax does the same with a
//   symbolic dim in the struct info. The whole rest of the graph pays for
//   the one op: no extent is known when its loops are scheduled.
// * ONNX Runtime. No kernel has an ahead-of-time shape: each allocates its
//   outputs when it runs (OpKernelContext::Output(i, shape)). NonZero counts,
//   allocates [rank, count], writes; the next kernel sees a tensor like any.
// * Kiln. Every kernel is specialised to every extent (engine/shape_variants.h
//   says why: tile choice and boundary loops are where the speed is), so
//   neither a symbolic extent nor an allocating kernel fits. Three ways were
//   weighed:
//     (a) an output sized by an upper bound (the input's element count) plus
//         a count: every consumer would have to know which rows are real (a
//         reduction or a transpose over the padded dim is wrong), TVM's `Any`
//         again, through the whole graph;
//     (b) the graph split at the op, the rest specialised on the count: a
//         run-time probe stage in the engine before the variant lookup;
//     (c) specialised on the value: the op's input is a constant (folded at
//         import, or by FoldConstant) or computed from the model's inputs
//         alone, and those inputs then decide shapes as a Reshape's target
//         does (compiler/frontend/onnx_converter.h, ConstantOperand): each
//         value compiles a variant of its own, where the op is a constant.
//   Kiln does (c). It needs no run-time machinery at all, and everything
//   downstream is exact and static: a reduction over the result, a gather by
//   it, a zero-size result, all compile as for any constant. Its price is a
//   variant per distinct value, so only small inputs decide (bool and float
//   inputs of at most kMaxFloatDecidingValues elements; integers as any
//   deciding input); NonZero over an activation of a large input is refused
//   as a value-dependent shape. (b) is the step after: the op already takes
//   its count as an attribute (its shape relation is [rank, count]) and its
//   compute is the lowered kernel's element given the count, so keying the
//   variant by the count instead of the value changes where the count comes
//   from, not the op. unique has no compute at all (distinct slices in
//   order are a sort): it only ever folds, and BuildProgram refuses an op
//   without a compute by name rather than crash in lowering.
//
//   ONNX NonZero(x)          value known?        Kiln graph
//        │                  ──────────────▶   constant int64[rank, count]
//        ▼                     (folded)            │
//   Transpose / Gather / ...                   ordinary static ops
#include "compiler/ops/value_shape_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/graph.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/te/compute_context.h"

namespace kiln {
namespace {

using te::BinaryOp;
using te::CompareOp;
using te::ComputeContext;
using te::Expr;
using te::ExprBuilder;

// The input's dims as nonzero indexes them: a scalar is one element of a [1].
std::vector<int64_t> CoordinateShape(const TensorType& in) {
  return in.rank() == 0 ? std::vector<int64_t>{1} : in.shape;
}

void RegisterNonZero(OpRegistry& r) {
  OpDef def;
  def.name = "nonzero";
  def.pattern = OpPattern::kOpaque;
  def.summary =
      "the coordinates (int64 [rank, count]) of the input's nonzero elements in row-major order "
      "(attribute count: how many there are)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"count"}));
    NonZeroAttrs a;
    KILN_ASSIGN_OR_RETURN(a.count, GetIntAttr(raw, "count", 0));
    return Attrs(a);
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    const int64_t count = std::get<NonZeroAttrs>(attrs).count;
    if (count < 0 || count > in[0].NumElements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("nonzero: count ", count, " for ", in[0].ToString()));
    }
    const int64_t rank = static_cast<int64_t>(CoordinateShape(in[0]).size());
    return TensorType{DType::kInt64, {rank, count}};
  };
  // out[d, j]: coordinate d of the element k that is nonzero with exactly j
  // nonzero elements before it. n^2 per output element (the count before
  // each candidate); FoldConstant takes `fold` instead.
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    const std::vector<int64_t> shape = CoordinateShape(ctx.input_type(0));
    const bool scalar = ctx.input_type(0).rank() == 0;
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<te::Var> k, m;
    for (int64_t d = 0; d < rank; ++d) {
      k.push_back(ctx.ReduceVar(absl::StrCat("k", d), shape[d]));
      m.push_back(ctx.ReduceVar(absl::StrCat("m", d), shape[d]));
    }
    auto refs = [&](const std::vector<te::Var>& vars) {
      std::vector<Expr> idx;
      for (const te::Var& v : vars) idx.push_back(b.Ref(v));
      return idx;
    };
    auto flat = [&](const std::vector<te::Var>& vars) {
      Expr f = b.Int(0);
      for (int64_t d = 0; d < rank; ++d) f = b.Add(b.Mul(f, b.Int(shape[d])), b.Ref(vars[d]));
      return f;
    };
    auto nonzero_at = [&](const std::vector<te::Var>& vars) {
      Expr x = ctx.Input(0, scalar ? std::vector<Expr>{} : refs(vars));
      return b.Compare(CompareOp::kNE, x, b.Constant(x->type, 0));
    };
    Expr before = b.Reduce(
        te::ReduceOp::kSum, m,
        b.Select(
            b.Binary(BinaryOp::kAnd, b.Compare(CompareOp::kLT, flat(m), flat(k)), nonzero_at(m)),
            b.Int(1), b.Int(0)));
    Expr hit =
        b.Binary(BinaryOp::kAnd, nonzero_at(k), b.Compare(CompareOp::kEQ, before, ctx.out()[1]));
    Expr coordinate = b.Ref(k[rank - 1]);
    for (int64_t d = rank - 2; d >= 0; --d) {
      coordinate =
          b.Select(b.Compare(CompareOp::kEQ, ctx.out()[0], b.Int(d)), b.Ref(k[d]), coordinate);
    }
    return b.Reduce(te::ReduceOp::kSum, k, b.Select(hit, coordinate, b.Int(0)));
  };
  def.fold = [](const std::vector<const ConstantData*>& in, const Attrs&, ConstantData& out) {
    const ConstantData& x = *in[0];
    const std::vector<int64_t> shape = CoordinateShape(x.type);
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t count = out.type.shape[1];
    const int64_t n = x.type.NumElements();
    std::vector<int64_t> coordinate(rank, 0);
    int64_t j = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (ReadElementAsDouble(x.type.dtype, x.bytes.data(), k) != 0 && j < count) {
        for (int64_t d = 0; d < rank; ++d) {
          WriteElementFromInt(DType::kInt64, out.bytes.data(), d * count + j, coordinate[d]);
        }
        ++j;
      }
      for (int64_t d = rank - 1; d >= 0; --d) {  // the next coordinate, odometer-wise
        if (++coordinate[d] < shape[d]) break;
        coordinate[d] = 0;
      }
    }
  };
  r.Register(std::move(def));
}

// x viewed as [outer, extent, inner] around `axis` (flattened: [1, n, 1]):
// slice s is every x[o, s, i].
struct SliceView {
  int64_t outer = 1, extent = 1, inner = 1;
};

SliceView ViewAround(const TensorType& x, std::optional<int64_t> axis) {
  SliceView v;
  if (!axis) {
    v.extent = x.NumElements();
    return v;
  }
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < *axis) v.outer *= x.shape[d];
    if (d == *axis) v.extent = x.shape[d];
    if (d > *axis) v.inner *= x.shape[d];
  }
  return v;
}

// The distinct slices of x along `axis`, as ONNX Unique gives them.
struct UniqueSlices {
  std::vector<int64_t> first;    // per distinct slice, in output order: its first position
  std::vector<int64_t> counts;   // per distinct slice, in output order: how often it occurs
  std::vector<int64_t> inverse;  // per slice of x: its distinct slice's place in the output
};

// Slices compare by their elements' values (as doubles), in row-major
// order: sorted output is lexicographic, as NumPy's np.unique(axis=...);
// NaNs are equal to each other and after every number, as NumPy sorts and
// (equal_nan, its default) collapses them. That keeps the order total.
// Distinct slices are found by sorting positions (stable: the first of
// equal slices comes first), n log n slice comparisons.
UniqueSlices FindUnique(const ConstantData& x, std::optional<int64_t> axis, bool sorted) {
  const SliceView v = ViewAround(x.type, axis);
  const DType dtype = x.type.dtype;
  auto at = [&](int64_t o, int64_t s, int64_t i) {
    return ReadElementAsDouble(dtype, x.bytes.data(), (o * v.extent + s) * v.inner + i);
  };
  auto compare = [&](int64_t a, int64_t b) {  // <0, 0, >0
    for (int64_t o = 0; o < v.outer; ++o) {
      for (int64_t i = 0; i < v.inner; ++i) {
        const double p = at(o, a, i), q = at(o, b, i);
        if (std::isnan(p) || std::isnan(q)) {  // NaNs equal, after every number (NumPy's)
          if (std::isnan(p) != std::isnan(q)) return std::isnan(p) ? 1 : -1;
          continue;
        }
        if (p < q) return -1;
        if (p > q) return 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> order(v.extent);
  for (int64_t s = 0; s < v.extent; ++s) order[s] = s;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  // Runs of equal slices in `order`: each a distinct slice, its first
  // position the run's first (the sort was stable).
  std::vector<int64_t> group_of(v.extent);  // slice -> its run, in sorted order
  std::vector<int64_t> first, counts;
  for (int64_t r = 0; r < v.extent; ++r) {
    if (r == 0 || compare(order[r - 1], order[r]) != 0) {
      first.push_back(order[r]);
      counts.push_back(0);
    }
    group_of[order[r]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  // Unsorted: the runs in order of their first positions.
  std::vector<int64_t> place(first.size());  // run -> place in the output
  std::vector<int64_t> runs(first.size());
  for (size_t g = 0; g < runs.size(); ++g) runs[g] = static_cast<int64_t>(g);
  if (!sorted) {
    std::sort(runs.begin(), runs.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  }
  UniqueSlices u;
  for (size_t p = 0; p < runs.size(); ++p) {
    place[runs[p]] = static_cast<int64_t>(p);
    u.first.push_back(first[runs[p]]);
    u.counts.push_back(counts[runs[p]]);
  }
  for (int64_t s = 0; s < v.extent; ++s) u.inverse.push_back(place[group_of[s]]);
  return u;
}

// The output types of unique: the slices (x with `count` along the axis,
// or [count] flattened), then int64 [count], [slices of x], [count].
absl::StatusOr<TensorType> UniqueRelation(const std::vector<TensorType>& in, const Attrs& attrs) {
  const UniqueAttrs& a = std::get<UniqueAttrs>(attrs);
  if (a.axis && (*a.axis < 0 || *a.axis >= in[0].rank())) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique: axis ", *a.axis, " for ", in[0].ToString()));
  }
  const SliceView v = ViewAround(in[0], a.axis);
  if (a.count < 0 || a.count > v.extent || (a.count == 0 && v.extent > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique: count ", a.count, " for ", v.extent, " slices"));
  }
  switch (a.output) {
    case 0: {
      if (!a.axis) return TensorType{in[0].dtype, {a.count}};
      std::vector<int64_t> shape = in[0].shape;
      shape[*a.axis] = a.count;
      return TensorType{in[0].dtype, shape};
    }
    case 1:
    case 3:
      return TensorType{DType::kInt64, {a.count}};
    case 2:
      return TensorType{DType::kInt64, {v.extent}};
    default:
      return absl::InvalidArgumentError(absl::StrCat("unique: output ", a.output, " of 0..3"));
  }
}

void RegisterUnique(OpRegistry& r) {
  OpDef def;
  def.name = "unique";
  def.pattern = OpPattern::kOpaque;
  def.summary =
      "the distinct slices along `axis` (none: every element) and where they are (attributes "
      "sorted, output 0..3 as ONNX Unique's outputs, count); folded only";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis", "sorted", "output", "count"}));
    UniqueAttrs a;
    if (raw.count("axis")) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, GetIntAttr(raw, "axis", 0));
      a.axis = axis;
    }
    KILN_ASSIGN_OR_RETURN(int64_t sorted, GetIntAttr(raw, "sorted", 1));
    a.sorted = sorted != 0;
    KILN_ASSIGN_OR_RETURN(a.output, GetIntAttr(raw, "output", 0));
    KILN_ASSIGN_OR_RETURN(a.count, GetIntAttr(raw, "count", 0));
    return Attrs(a);
  };
  def.infer_type = UniqueRelation;
  // No compute: distinct slices in order are a sort, which no loop nest of
  // Kiln's expresses at a sane cost; the op only ever folds (its input is a
  // constant by construction, the design note above), and BuildProgram
  // refuses it otherwise.
  def.fold = [](const std::vector<const ConstantData*>& in, const Attrs& attrs, ConstantData& out) {
    const UniqueAttrs& a = std::get<UniqueAttrs>(attrs);
    const ConstantData& x = *in[0];
    const UniqueSlices u = FindUnique(x, a.axis, a.sorted);
    const std::vector<int64_t>* ints = a.output == 1   ? &u.first
                                       : a.output == 2 ? &u.inverse
                                       : a.output == 3 ? &u.counts
                                                       : nullptr;
    if (ints != nullptr) {
      const int64_t n = std::min<int64_t>(out.type.NumElements(), ints->size());
      for (int64_t k = 0; k < n; ++k) {
        WriteElementFromInt(DType::kInt64, out.bytes.data(), k, (*ints)[k]);
      }
      return;
    }
    const SliceView v = ViewAround(x.type, a.axis);
    const int64_t size = DTypeSize(x.type.dtype);
    const int64_t count = std::min<int64_t>(a.count, u.first.size());
    for (int64_t o = 0; o < v.outer; ++o) {
      for (int64_t j = 0; j < count; ++j) {
        std::memcpy(out.bytes.data() + (o * a.count + j) * v.inner * size,
                    x.bytes.data() + (o * v.extent + u.first[j]) * v.inner * size, v.inner * size);
      }
    }
  };
  r.Register(std::move(def));
}

}  // namespace

int64_t CountUnique(const ConstantData& x, std::optional<int64_t> axis) {
  return static_cast<int64_t>(FindUnique(x, axis, true).first.size());
}

int64_t CountNonZero(const ConstantData& x) {
  int64_t count = 0;
  const int64_t n = x.type.NumElements();
  for (int64_t k = 0; k < n; ++k) {
    count += ReadElementAsDouble(x.type.dtype, x.bytes.data(), k) != 0;
  }
  return count;
}

void RegisterValueShapeOps(OpRegistry& r) {
  RegisterNonZero(r);
  RegisterUnique(r);
}

}  // namespace kiln
