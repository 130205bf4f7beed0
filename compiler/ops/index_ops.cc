// Ops that read or write at computed positions: gather_nd, scatter_elements,
// scatter_nd, top_k (values and indices) and reverse_sequence.
//
// Each is written, TE style, as what one output element is. A scatter's
// element searches the indices for writes to it (the last write wins, or
// the writes combine by the reduction), so it costs the number of updates
// per element: cheap for the few-position updates models make (a KV cache
// slot, a mask), quadratic for a scatter of a whole tensor. top_k ranks
// each candidate by counting those that beat it (ties: the lower index
// first), n^2 per output row: fine for the axes models sort (detections,
// beams), slow for a top-k over a 50 000-word vocabulary.
//
// Index operands are normalised (negative counts from the end) and clamped
// into range, so no read leaves a tensor whatever the indices hold.
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/ops/shape_relations.h"
#include "compiler/te/compute_context.h"

namespace kiln {
namespace {

using te::BinaryOp;
using te::CompareOp;
using te::ComputeContext;
using te::Expr;
using te::ExprBuilder;

Expr And(ExprBuilder& b, Expr x, Expr y) { return b.Binary(BinaryOp::kAnd, x, y); }
Expr Eq(ExprBuilder& b, Expr x, Expr y) { return b.Compare(CompareOp::kEQ, x, y); }

// An index read from a tensor: negative counts from the end of a dim of n.
Expr Normalized(ExprBuilder& b, Expr i, int64_t n) {
  return b.Select(b.Compare(CompareOp::kLT, i, b.Int(0)), b.Add(i, b.Int(n)), i);
}

absl::Status RequireIndices(const TensorType& t, const char* op) {
  if (t.dtype != DType::kInt64 && t.dtype != DType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat(op, " indices must be int32 or int64, got ",
                                                   t.ToString()));
  }
  return absl::OkStatus();
}

// The lowest value of a compute type, for max-combining.
Expr Lowest(ExprBuilder& b, te::ScalarType t) {
  return te::IsFloat(t) ? b.Constant(t, -INFINITY) : b.Int(std::numeric_limits<int64_t>::min());
}
Expr Highest(ExprBuilder& b, te::ScalarType t) {
  return te::IsFloat(t) ? b.Constant(t, INFINITY) : b.Int(std::numeric_limits<int64_t>::max());
}

absl::StatusOr<Attrs> ParseScatter(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis", "reduction"}));
  ScatterAttrs a;
  KILN_ASSIGN_OR_RETURN(a.axis, GetIntAttr(raw, "axis", 0));
  auto it = raw.find("reduction");
  const std::string* r = it == raw.end() ? nullptr : std::get_if<std::string>(&it->second);
  const std::string reduction = r ? *r : "none";
  std::optional<ScatterAttrs::Reduction> named = ScatterReductionNamed(reduction);
  if (!named)
    return absl::InvalidArgumentError(absl::StrCat("scatter reduction '", reduction, "'"));
  a.reduction = *named;
  return Attrs(a);
}

// data at p with the matching updates combined in. `match` and `update` are
// written in terms of the reduction variables `vars`; `order` is a position
// of each candidate that grows with the update order (the last write wins).
Expr Combine(ComputeContext& ctx, const ScatterAttrs& a, const std::vector<te::Var>& vars,
             Expr match, const std::function<Expr(Expr)>& update_at_order, Expr update,
             Expr order) {
  ExprBuilder& b = ctx.b();
  Expr data = ctx.Input(0, ctx.out());
  const te::ScalarType t = data->type;
  switch (a.reduction) {
    case ScatterAttrs::Reduction::kNone: {
      Expr last = b.Reduce(te::ReduceOp::kMax, vars, b.Select(match, order, b.Int(-1)));
      return b.Select(b.Compare(CompareOp::kGE, last, b.Int(0)), update_at_order(last), data);
    }
    case ScatterAttrs::Reduction::kAdd:
      return b.Add(data, b.Reduce(te::ReduceOp::kSum, vars,
                                  b.Select(match, update, b.Constant(t, 0))));
    case ScatterAttrs::Reduction::kMul:
      return b.Mul(data, b.Reduce(te::ReduceOp::kProd, vars,
                                  b.Select(match, update, b.Constant(t, 1))));
    case ScatterAttrs::Reduction::kMax:
      return b.Max(data, b.Reduce(te::ReduceOp::kMax, vars,
                                  b.Select(match, update, Lowest(b, t))));
    case ScatterAttrs::Reduction::kMin:
      return b.Min(data, b.Reduce(te::ReduceOp::kMin, vars,
                                  b.Select(match, update, Highest(b, t))));
  }
  return data;
}

void RegisterGatherNd(OpRegistry& r) {
  OpDef def;
  def.name = "gather_nd";
  def.pattern = OpPattern::kInjective;
  def.min_inputs = def.max_inputs = 2;
  def.summary = "data at the index tuples of the indices' last dim (attribute axis = batch_dims)";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis"}));
    KILN_ASSIGN_OR_RETURN(int64_t batch, GetIntAttr(raw, "axis", 0));
    return Attrs(AxisAttrs{batch});
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireIndices(in[1], "gather_nd"));
    const int64_t batch = std::get<AxisAttrs>(attrs).axis;
    const TensorType& data = in[0];
    const TensorType& idx = in[1];
    if (idx.rank() < 1 || batch < 0 || batch >= std::min(data.rank(), idx.rank())) {
      return absl::InvalidArgumentError("gather_nd: batch_dims out of range");
    }
    const int64_t m = idx.shape.back();
    if (m < 1 || batch + m > data.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("gather_nd: index tuples of ", m,
                                                     " do not fit ", data.ToString()));
    }
    for (int64_t d = 0; d < batch; ++d) {
      if (data.shape[d] != idx.shape[d]) {
        return absl::InvalidArgumentError("gather_nd: batch dims differ");
      }
    }
    std::vector<int64_t> shape(idx.shape.begin(), idx.shape.end() - 1);
    shape.insert(shape.end(), data.shape.begin() + batch + m, data.shape.end());
    return TensorType{data.dtype, shape};
  };
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    const int64_t batch = ctx.attrs<AxisAttrs>().axis;
    const std::vector<int64_t>& ds = ctx.input_type(0).shape;
    const std::vector<int64_t>& is = ctx.input_type(1).shape;
    const int64_t q = static_cast<int64_t>(is.size());
    const int64_t m = is.back();
    const std::vector<Expr>& o = ctx.out();
    std::vector<Expr> data_idx(o.begin(), o.begin() + batch);
    for (int64_t j = 0; j < m; ++j) {
      std::vector<Expr> tuple(o.begin(), o.begin() + (q - 1));
      tuple.push_back(b.Int(j));
      const int64_t n = ds[batch + j];
      data_idx.push_back(b.ClampIndex(Normalized(b, ctx.Input(1, tuple), n), n));
    }
    data_idx.insert(data_idx.end(), o.begin() + (q - 1), o.end());
    return ctx.Input(0, data_idx);
  };
  r.Register(std::move(def));
}

void RegisterScatterElements(OpRegistry& r) {
  OpDef def;
  def.name = "scatter_elements";
  def.pattern = OpPattern::kOpaque;
  def.min_inputs = def.max_inputs = 3;
  def.summary = "data with updates written along `axis` at indices (attribute reduction)";
  def.parse_attrs = ParseScatter;
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireIndices(in[1], "scatter_elements"));
    KILN_RETURN_IF_ERROR(NormalizeAxis(std::get<ScatterAttrs>(attrs).axis, in[0].rank()).status());
    if (in[1].shape != in[2].shape || in[1].rank() != in[0].rank() || in[2].dtype != in[0].dtype) {
      return absl::InvalidArgumentError(
          "scatter_elements: indices and updates must share a shape of the data's rank");
    }
    for (int64_t d = 0; d < in[0].rank(); ++d) {
      if (in[1].shape[d] > in[0].shape[d] &&
          d != *NormalizeAxis(std::get<ScatterAttrs>(attrs).axis, in[0].rank())) {
        return absl::InvalidArgumentError("scatter_elements: indices larger than the data");
      }
    }
    return in[0];
  };
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    const ScatterAttrs& a = ctx.attrs<ScatterAttrs>();
    const std::vector<int64_t>& ds = ctx.input_type(0).shape;
    const std::vector<int64_t>& is = ctx.input_type(1).shape;
    const int64_t rank = static_cast<int64_t>(ds.size());
    const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
    const std::vector<Expr>& p = ctx.out();
    te::Var k = ctx.ReduceVar("k", is[axis]);
    // The update slot (p with the axis coordinate k), inside the indices' shape.
    Expr inside = b.Bool(true);
    std::vector<Expr> slot(p.begin(), p.end());
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (is[d] < ds[d]) inside = And(b, inside, b.Compare(CompareOp::kLT, p[d], b.Int(is[d])));
      slot[d] = b.ClampIndex(p[d], is[d]);
    }
    auto slot_at = [&](Expr at) {
      std::vector<Expr> s = slot;
      s[axis] = at;
      return s;
    };
    Expr target = Normalized(b, ctx.Input(1, slot_at(b.Ref(k))), ds[axis]);
    Expr match = And(b, inside, Eq(b, target, p[axis]));
    return Combine(
        ctx, a, {k}, match,
        [&](Expr last) { return ctx.Input(2, slot_at(b.ClampIndex(last, is[axis]))); },
        ctx.Input(2, slot_at(b.Ref(k))), b.Ref(k));
  };
  r.Register(std::move(def));
}

void RegisterScatterNd(OpRegistry& r) {
  OpDef def;
  def.name = "scatter_nd";
  def.pattern = OpPattern::kOpaque;
  def.min_inputs = def.max_inputs = 3;
  def.summary = "data with updates written at the index tuples (attribute reduction)";
  def.parse_attrs = ParseScatter;
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs&) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireIndices(in[1], "scatter_nd"));
    const TensorType& data = in[0];
    const TensorType& idx = in[1];
    if (idx.rank() < 1 || idx.shape.back() < 1 || idx.shape.back() > data.rank()) {
      return absl::InvalidArgumentError("scatter_nd: index tuples do not fit the data");
    }
    std::vector<int64_t> want(idx.shape.begin(), idx.shape.end() - 1);
    want.insert(want.end(), data.shape.begin() + idx.shape.back(), data.shape.end());
    if (in[2].shape != want || in[2].dtype != data.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("scatter_nd: updates must be ",
                                                     ShapeToString(want)));
    }
    return data;
  };
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    const ScatterAttrs& a = ctx.attrs<ScatterAttrs>();
    const std::vector<int64_t>& ds = ctx.input_type(0).shape;
    const std::vector<int64_t>& is = ctx.input_type(1).shape;
    const int64_t m = is.back();
    const std::vector<Expr>& p = ctx.out();
    std::vector<te::Var> vars;
    std::vector<Expr> u;
    for (size_t d = 0; d + 1 < is.size(); ++d) {
      vars.push_back(ctx.ReduceVar("u" + std::to_string(d), is[d]));
      u.push_back(b.Ref(vars.back()));
    }
    Expr match = b.Bool(true);
    for (int64_t j = 0; j < m; ++j) {
      std::vector<Expr> tuple = u;
      tuple.push_back(b.Int(j));
      match = And(b, match, Eq(b, Normalized(b, ctx.Input(1, tuple), ds[j]), p[j]));
    }
    auto update_at = [&](const std::vector<Expr>& at) {
      std::vector<Expr> idx = at;
      idx.insert(idx.end(), p.begin() + m, p.end());
      return ctx.Input(2, idx);
    };
    // The update's order: its flat position among the index tuples.
    Expr order = b.Int(0);
    int64_t tuples = 1;
    for (size_t d = 0; d < u.size(); ++d) {
      order = b.Add(b.Mul(order, b.Int(is[d])), u[d]);
      tuples *= is[d];
    }
    return Combine(
        ctx, a, vars, match,
        [&](Expr last) {
          // -1 where no tuple names the element: the select drops the update
          // then, but loads are eager, so it is read at a tuple that exists
          // (as scatter_elements does; bounds-checked kernels caught the read
          // before the updates).
          last = b.ClampIndex(last, tuples);
          std::vector<Expr> at(u.size());
          for (int64_t d = static_cast<int64_t>(u.size()) - 1; d >= 0; --d) {
            at[d] = b.Mod(last, b.Int(is[d]));
            last = b.Div(last, b.Int(is[d]));
          }
          return update_at(at);
        },
        update_at(u), order);
  };
  r.Register(std::move(def));
}

absl::StatusOr<Attrs> ParseTopK(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"axis", "k", "largest"}));
  TopKAttrs a;
  KILN_ASSIGN_OR_RETURN(a.axis, GetIntAttr(raw, "axis", -1));
  KILN_ASSIGN_OR_RETURN(a.k, GetIntAttr(raw, "k", 1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, GetIntAttr(raw, "largest", 1));
  a.largest = largest != 0;
  return Attrs(a);
}

// The position along the axis of the output's r-th element: the i whose
// count of elements beating it is r.
Expr TopKPosition(ComputeContext& ctx) {
  ExprBuilder& b = ctx.b();
  const TopKAttrs& a = ctx.attrs<TopKAttrs>();
  const int64_t rank = ctx.input_type(0).rank();
  const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  const int64_t n = ctx.input_type(0).shape[axis];
  te::Var i = ctx.ReduceVar("i", n);
  te::Var j = ctx.ReduceVar("j", n);
  auto at = [&](Expr pos) {
    std::vector<Expr> idx = ctx.out();
    idx[axis] = pos;
    return ctx.Input(0, idx);
  };
  Expr xi = at(b.Ref(i));
  Expr xj = at(b.Ref(j));
  Expr better = b.Compare(a.largest ? CompareOp::kGT : CompareOp::kLT, xj, xi);
  Expr tie_before = And(b, Eq(b, xj, xi), b.Compare(CompareOp::kLT, b.Ref(j), b.Ref(i)));
  Expr beats = b.Binary(BinaryOp::kOr, better, tie_before);
  Expr rank_of_i = b.Reduce(te::ReduceOp::kSum, {j}, b.Select(beats, b.Int(1), b.Int(0)));
  Expr hit = Eq(b, rank_of_i, ctx.out()[axis]);
  return b.Reduce(te::ReduceOp::kMax, {i}, b.Select(hit, b.Ref(i), b.Int(0)));
}

void RegisterTopK(OpRegistry& r, bool values) {
  OpDef def;
  def.name = values ? "top_k_values" : "top_k_indices";
  def.pattern = OpPattern::kOpaque;
  def.summary = values ? "the k largest (attribute largest = 0: smallest) along `axis`, in order"
                       : "the positions (int64) of top_k_values' elements";
  def.parse_attrs = ParseTopK;
  def.infer_type = [values](const std::vector<TensorType>& in,
                            const Attrs& attrs) -> absl::StatusOr<TensorType> {
    const TopKAttrs& a = std::get<TopKAttrs>(attrs);
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a.axis, in[0].rank()));
    if (in[0].dtype == DType::kBool) return absl::InvalidArgumentError("top_k of bool");
    if (a.k < 0 || a.k > in[0].shape[axis]) {
      return absl::InvalidArgumentError(absl::StrCat("top_k: k = ", a.k, " for a dim of ",
                                                     in[0].shape[axis]));
    }
    std::vector<int64_t> shape = in[0].shape;
    shape[axis] = a.k;
    return TensorType{values ? in[0].dtype : DType::kInt64, shape};
  };
  def.compute = [values](ComputeContext& ctx) {
    Expr position = TopKPosition(ctx);
    if (!values) return position;
    const TopKAttrs& a = ctx.attrs<TopKAttrs>();
    const int64_t rank = ctx.input_type(0).rank();
    std::vector<Expr> idx = ctx.out();
    idx[a.axis < 0 ? a.axis + rank : a.axis] = position;
    return ctx.Input(0, idx);
  };
  r.Register(std::move(def));
}

void RegisterReverseSequence(OpRegistry& r) {
  OpDef def;
  def.name = "reverse_sequence";
  def.pattern = OpPattern::kInjective;
  def.min_inputs = def.max_inputs = 2;
  def.summary = "the first sequence_lens[b] steps along time_axis reversed, per batch entry";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"batch_axis", "time_axis"}));
    ReverseSequenceAttrs a;
    KILN_ASSIGN_OR_RETURN(a.batch_axis, GetIntAttr(raw, "batch_axis", 1));
    KILN_ASSIGN_OR_RETURN(a.time_axis, GetIntAttr(raw, "time_axis", 0));
    return Attrs(a);
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    const ReverseSequenceAttrs& a = std::get<ReverseSequenceAttrs>(attrs);
    KILN_RETURN_IF_ERROR(RequireIndices(in[1], "reverse_sequence"));
    if (in[0].rank() < 2 || a.batch_axis == a.time_axis || a.batch_axis < 0 ||
        a.time_axis < 0 || a.batch_axis > 1 || a.time_axis > 1 ||
        in[1].shape != std::vector<int64_t>{in[0].shape[a.batch_axis]}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reverse_sequence wants batch and time axes 0 and 1 and lengths [batch], got ",
          in[0].ToString(), " and ", in[1].ToString()));
    }
    return in[0];
  };
  def.compute = [](ComputeContext& ctx) {
    ExprBuilder& b = ctx.b();
    const ReverseSequenceAttrs& a = ctx.attrs<ReverseSequenceAttrs>();
    const int64_t steps = ctx.input_type(0).shape[a.time_axis];
    std::vector<Expr> idx = ctx.out();
    Expr t = idx[a.time_axis];
    // A length beyond the axis reverses all of it.
    Expr len = b.Min(b.Max(ctx.Input(1, {idx[a.batch_axis]}), b.Int(0)), b.Int(steps));
    Expr reversed = b.Sub(b.Sub(len, b.Int(1)), t);
    idx[a.time_axis] =
        b.ClampIndex(b.Select(b.Compare(CompareOp::kLT, t, len), reversed, t), steps);
    return ctx.Input(0, idx);
  };
  r.Register(std::move(def));
}

}  // namespace

void RegisterIndexOps(OpRegistry& r) {
  RegisterGatherNd(r);
  RegisterScatterElements(r);
  RegisterScatterNd(r);
  RegisterTopK(r, /*values=*/true);
  RegisterTopK(r, /*values=*/false);
  RegisterReverseSequence(r);
}

}  // namespace kiln
