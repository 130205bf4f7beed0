// ONNX operators whose output shape depends on an input's values: NonZero,
// Compress and Unique. Kiln specialises them on the value (the design note in
// compiler/ops/value_shape_ops.cc): the deciding input must fold to a
// constant here, or be computed from model inputs alone, which then decide
// shapes and compile a variant per value (Converter::ConstantOperand).
#include <string>
#include <vector>

#include "compiler/frontend/onnx_converter.h"
#include "compiler/ops/value_shape_ops.h"

namespace kiln::onnx_import {
namespace {

std::string What(const onnx::NodeProto& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
}

// nonzero of input `i` of `n`, its count read off the input's value.
// Unimplemented past what folding takes (kMaxFoldedElements of output):
// the kernel from nonzero's compute is n^2 per element.
absl::StatusOr<Node*> NonZeroOf(Converter& c, const onnx::NodeProto& n, int i,
                                const std::string& suffix) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.ConstantOperand(n, i));
  KILN_ASSIGN_OR_RETURN(Node* y,
                        c.Add(n, "nonzero", {x}, NonZeroAttrs{CountNonZero(*x->value)}, suffix));
  KILN_ASSIGN_OR_RETURN(y, c.Folded(y));
  if (!y->is_constant()) {
    return absl::UnimplementedError(absl::StrCat(What(n), ": an input of ", x->type.NumElements(),
                                                 " elements is too large to fold"));
  }
  return y;
}

absl::Status ConvertNonZero(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* y, NonZeroOf(c, n, 0, ""));
  return c.Define(n.output(0), y);
}

// Compress(data, condition, axis): the slices along `axis` (or the elements
// of the flattened data, without one) where the condition is true; a
// condition shorter than the axis drops the rest. Only the condition
// decides the shape: the data stays whatever it is, gathered at the
// condition's (constant) positions.
absl::Status ConvertCompress(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* data, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* condition, c.Value(n, 1));
  if (condition->type.rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n), ": the condition must be 1-D, got ", condition->type.ToString()));
  }
  int64_t axis = 0;
  if (FindAttr(n, "axis") != nullptr) {
    KILN_ASSIGN_OR_RETURN(axis, AxisAttr(n, "axis", 0, data->type.rank()));
  } else {
    KILN_ASSIGN_OR_RETURN(
        data, c.Add(n, "reshape", {data}, ReshapeAttrs{{data->type.NumElements()}}, "/flat"));
  }
  KILN_ASSIGN_OR_RETURN(Node* positions, NonZeroOf(c, n, 1, "/positions"));
  const int64_t count = positions->type.shape[1];
  const int64_t extent = data->type.shape[axis];
  for (int64_t j = 0; j < count; ++j) {
    const int64_t p = ReadElementAsInt(DType::kInt64, positions->value->bytes.data(), j);
    if (p >= extent) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": the condition is true at ", p,
                                                     ", past the ", extent, " slices along axis ",
                                                     axis));
    }
  }
  // nonzero's [1, count] as gather's [count] (its bytes as they are).
  Node* indices = c.Constant(n.name() + "/indices", TensorType{DType::kInt64, {count}},
                             positions->value->bytes.data());
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "gather", {data, indices}, AxisAttrs{axis}));
  KILN_ASSIGN_OR_RETURN(y, c.Folded(y));
  return c.Define(n.output(0), y);
}

// Unique(X, axis, sorted): every output asked for is a unique node over
// the constant X, folded here (unique has no kernel: its input is known).
absl::Status ConvertUnique(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.ConstantOperand(n, 0));
  UniqueAttrs a;
  if (FindAttr(n, "axis") != nullptr) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(n, "axis", 0, x->type.rank()));
    a.axis = axis;
  }
  a.sorted = IntAttr(n, "sorted", 1) != 0;
  a.count = CountUnique(*x->value, a.axis);
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty()) continue;
    a.output = k;
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "unique", {x}, a, absl::StrCat("/", k)));
    KILN_ASSIGN_OR_RETURN(y, c.Folded(y));
    if (!y->is_constant()) {
      return absl::UnimplementedError(absl::StrCat(What(n), ": an input of ", x->type.NumElements(),
                                                   " elements is too large to fold"));
    }
    KILN_RETURN_IF_ERROR(c.Define(n.output(k), y));
  }
  return absl::OkStatus();
}

}  // namespace

void AddValueShapeConverters(ConverterMap& table) {
  table["NonZero"] = ConvertNonZero;
  table["Compress"] = ConvertCompress;
  table["Unique"] = ConvertUnique;
}

}  // namespace kiln::onnx_import
