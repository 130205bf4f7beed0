#include "compiler/passes/fold_constant.h"

#include "absl/status/status.h"

#include <string>
#include <vector>

#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/evaluator.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

std::shared_ptr<const ConstantData> Evaluate(const Node& n) {
  if (n.op->fold) {
    std::vector<const ConstantData*> inputs;
    for (const Node* in : n.inputs) inputs.push_back(in->value.get());
    auto data = std::make_shared<ConstantData>();
    data->type = n.type;
    data->bytes.assign(static_cast<size_t>(n.type.ByteSize()), '\0');
    n.op->fold(inputs, n.attrs, *data);
    return data;
  }
  te::ExprBuilder b;
  std::vector<te::Var> vars;
  std::vector<te::Expr> idx;
  for (size_t d = 0; d < n.type.shape.size(); ++d) {
    vars.push_back(b.NewVar("i" + std::to_string(d), n.type.shape[d]));
    idx.push_back(b.Ref(vars.back()));
  }
  std::vector<TensorType> in_types;
  std::vector<te::Accessor> accessors;
  std::vector<te::EvalBuffer> buffers;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Node* in = n.inputs[i];
    in_types.push_back(in->type);
    te::ScalarType st = te::ScalarTypeOf(in->type.dtype);
    buffers.push_back({in->type.dtype, in->type.shape, in->value->bytes.data()});
    accessors.push_back([&b, i, st](const std::vector<te::Expr>& indices) {
      return b.Load(static_cast<int>(i), st, indices);
    });
  }
  te::ComputeContext ctx(b, n.attrs, in_types, n.type, std::move(accessors), idx);
  te::Expr value = n.op->compute(ctx);
  auto data = std::make_shared<ConstantData>();
  data->type = n.type;
  data->bytes.resize(n.type.ByteSize());
  te::EvaluateIntoBuffer(value, vars, n.type.shape, buffers, n.type.dtype, data->bytes.data());
  return data;
}

// For each output element of `out_shape`, the flat index it reads in an
// operand of `shape` under NumPy broadcasting.
std::vector<int64_t> BroadcastIndex(const std::vector<int64_t>& shape,
                                    const std::vector<int64_t>& out_shape) {
  const int64_t count = TensorType{DType::kFloat32, out_shape}.NumElements();
  const int64_t elements = TensorType{DType::kFloat32, shape}.NumElements();
  std::vector<int64_t> index(count, 0);
  if (elements == count) {
    for (int64_t i = 0; i < count; ++i) index[i] = i;
    return index;
  }
  if (elements == 1) return index;
  const size_t rank = out_shape.size(), offset = rank - shape.size();
  std::vector<int64_t> stride(rank, 0);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1, step = 1; d >= 0; --d) {
    if (shape[d] != 1) stride[offset + d] = step;
    step *= shape[d];
  }
  std::vector<int64_t> digit(rank, 0);
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    index[i] = at;
    for (size_t d = rank; d-- > 0;) {  // the next output index, odometer-wise
      at += stride[d];
      if (++digit[d] < out_shape[d]) break;
      at -= stride[d] * out_shape[d];
      digit[d] = 0;
    }
  }
  return index;
}

// Casts from integers to float32, and float32 add, sub, mul and div with
// broadcasting, folded by plain loops instead of the expression evaluator:
// the same arithmetic (elements widened as the evaluator loads them, each
// result rounded to float32 from double as it rounds), far faster. A QDQ
// model's weights, millions of int8 values cast and centered, took seconds
// to fold (qdq_resnet18: 1.1 s of its 3.4 s cold compile). Null when `n` is
// none of these.
std::shared_ptr<const ConstantData> FoldDirectly(const Node& n) {
  if (n.type.dtype != DType::kFloat32) return nullptr;
  const std::string& op = n.op->name;
  const DType from = n.inputs[0]->type.dtype;
  const bool cast = op == "cast" && IsIntegerDType(from) && from != DType::kUInt64;
  const bool add = op == "add", sub = op == "sub", mul = op == "mul", div = op == "div";
  const bool arithmetic = (add || sub || mul || div) && from == DType::kFloat32 &&
                          n.inputs[1]->type.dtype == DType::kFloat32;
  if (!cast && !arithmetic) return nullptr;  // before allocating: the evaluator folds it
  auto out = std::make_shared<ConstantData>();
  out->type = n.type;
  // Every element is written below.
  out->bytes = ConstantBytes::Aligned(static_cast<size_t>(n.type.ByteSize()));
  float* y = reinterpret_cast<float*>(out->bytes.data());
  const int64_t count = n.type.NumElements();
  if (cast) {
    const Node& x = *n.inputs[0];
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = ReadElementAsInt(from, x.value->bytes.data(), i);
      y[i] = static_cast<float>(static_cast<double>(v));
    }
    return out;
  }
  const float* a = n.inputs[0]->value->data<float>();
  const float* b = n.inputs[1]->value->data<float>();
  const std::vector<int64_t> ia = BroadcastIndex(n.inputs[0]->type.shape, n.type.shape);
  const std::vector<int64_t> ib = BroadcastIndex(n.inputs[1]->type.shape, n.type.shape);
  for (int64_t i = 0; i < count; ++i) {
    const double u = a[ia[i]], v = b[ib[i]];
    y[i] = static_cast<float>(add ? u + v : sub ? u - v : mul ? u * v : u / v);
  }
  return out;
}

absl::StatusOr<bool> FoldConstants(Graph& graph, const PassContext&) {
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->is_op() || n->inputs.empty()) continue;
    bool all_constant = true;
    for (const Node* in : n->inputs) all_constant &= in->is_constant();
    if (!all_constant || n->type.NumElements() > kMaxFoldedElements) continue;
    std::shared_ptr<const ConstantData> value = FoldDirectly(*n);
    Node* folded = graph.AddConstant(n->name, value ? std::move(value) : Evaluate(*n));
    graph.ReplaceAllUses(n, folded);
    changed = true;
  }
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ConstantData>> EvaluateConstantNode(const Node& n) {
  if (!n.is_op() || !n.type_known) return absl::InvalidArgumentError("not a typed op node");
  for (const Node* in : n.inputs) {
    if (!in->is_constant()) return absl::InvalidArgumentError("an input is not constant");
  }
  if (n.type.NumElements() > kMaxFoldedElements) {
    return absl::InvalidArgumentError("too large to fold");
  }
  return Evaluate(n);
}

std::unique_ptr<Pass> CreateFoldConstantPass() {
  return std::make_unique<FunctionPass>(PassInfo{"FoldConstant", 2, {"InferType"}},
                                        FoldConstants);
}

}  // namespace kiln
