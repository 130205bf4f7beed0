// ONNX operators Kiln composes from gathers, scatters and reductions with
// constant index tables, where no kernel of their own pays for itself:
// MaxUnpool (a scatter into zeros) and Det (the Leibniz sum over
// permutations, for the small matrices models take determinants of).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {

std::string What(const onnx::NodeProto& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
}

// The largest output MaxUnpool makes (elements): 2^28, 1 GiB of float32.
constexpr int64_t kMaxUnpoolElements = int64_t{1} << 28;
// scatter_elements matches every output element against every index, so
// MaxUnpool costs output x input steps: bounded here (about a second), and
// a larger unpooling is Unimplemented rather than a compile that never
// ends. Enough for the decoders of small segmentation nets; a windowed
// formulation (each output read from the few pooling windows over it)
// would lift it.
constexpr int64_t kMaxUnpoolSteps = int64_t{1} << 30;

// MaxUnpool: x and its MaxPool indices I [N, C, spatial...] (I flat over the
// whole output, as MaxPool's Indices output gives them), scattered into
// zeros of the shape the pooling undoes, (in - 1) * stride - pads + kernel
// per dim. The optional output_shape input (a constant, or an integer model
// input whose value compiles a variant) may be larger: zeros follow.
// An index outside the output writes nothing (scatter_elements matches
// targets; it never writes out of bounds).
absl::Status ConvertMaxUnpool(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(Node* indices, c.Value(n, 1));
  const int64_t rank = x->type.rank();
  const int64_t spatial = rank - 2;
  const std::vector<int64_t> kernel = IntsAttr(n, "kernel_shape", {});
  const std::vector<int64_t> strides = IntsAttr(n, "strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = IntsAttr(n, "pads", std::vector<int64_t>(2 * spatial, 0));
  if (rank < 3 || indices->type.shape != x->type.shape ||
      (indices->type.dtype != DType::kInt64 && indices->type.dtype != DType::kInt32) ||
      static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n),
                     ": wants x [N, C, spatial...], integer indices of its shape, and a kernel, "
                     "strides and pads per spatial dim; got ",
                     x->type.ToString(), " and ", indices->type.ToString()));
  }
  // The shape the pooling undoes: the indices' frame.
  std::vector<int64_t> frame = {x->type.shape[0], x->type.shape[1]};
  for (int64_t d = 0; d < spatial; ++d) {
    frame.push_back((x->type.shape[d + 2] - 1) * strides[d] - pads[d] - pads[d + spatial] +
                    kernel[d]);
  }
  std::vector<int64_t> out_shape = frame;
  if (c.HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(out_shape, c.ConstantInts(n, 2));
    bool fits = static_cast<int64_t>(out_shape.size()) == rank;
    for (int64_t d = 0; fits && d < rank; ++d) {
      fits = d < 2 ? out_shape[d] == frame[d] : out_shape[d] >= frame[d];
    }
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": output_shape ",
                                                     ShapeToString(out_shape),
                                                     " must keep x's batch and "
                                                     "channels and hold the unpooled ",
                                                     ShapeToString(frame)));
    }
  }
  for (const std::vector<int64_t>* s : {&frame, &out_shape}) {
    absl::StatusOr<int64_t> elements = CheckedNumElements(*s);
    if (!elements.ok() || *elements > kMaxUnpoolElements ||
        std::any_of(s->begin(), s->end(), [](int64_t d) { return d < 1; })) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": output shape ", ShapeToString(*s),
                                                     " is empty or over 2^28 elements"));
    }
  }
  const int64_t total = *CheckedNumElements(frame);
  const int64_t count = x->type.NumElements();
  if (total > kMaxUnpoolSteps / std::max<int64_t>(count, 1)) {
    return absl::UnimplementedError(absl::StrCat(
        What(n), ": unpooling ", count, " values into ", total, " is over Kiln's bound of 2^30 "
        "output x input elements"));
  }
  Node* zero = c.ScalarOf(n.name() + "/zero", x->type.dtype, 0);
  KILN_ASSIGN_OR_RETURN(Node* zeros, c.Add(n, "expand", {zero}, ReshapeAttrs{{total}}, "/zeros"));
  KILN_ASSIGN_OR_RETURN(Node* flat_x, c.Add(n, "reshape", {x}, ReshapeAttrs{{count}}, "/x"));
  KILN_ASSIGN_OR_RETURN(Node* flat_i,
                        c.Add(n, "reshape", {indices}, ReshapeAttrs{{count}}, "/indices"));
  KILN_ASSIGN_OR_RETURN(Node* scattered, c.Add(n, "scatter_elements", {zeros, flat_i, flat_x},
                                                ScatterAttrs{}, "/scattered"));
  if (out_shape == frame) {
    KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "reshape", {scattered}, ReshapeAttrs{frame}));
    return c.Define(n.output(0), y);
  }
  // A larger output_shape holds the unpooled frame at its start, zeros after
  // (as ONNX's reference places it).
  KILN_ASSIGN_OR_RETURN(Node* unpooled, c.Add(n, "reshape", {scattered}, ReshapeAttrs{frame},
                                              "/unpooled"));
  PadAttrs extra;
  extra.pads.assign(2 * rank, 0);
  for (int64_t d = 0; d < rank; ++d) extra.pads[rank + d] = out_shape[d] - frame[d];
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "pad", {unpooled}, extra));
  return c.Define(n.output(0), y);
}

// The largest matrix Det takes: 6 x 6, 720 products of 6.
constexpr int64_t kMaxDetOrder = 6;

// Det of x [..., M, M]: sum over the permutations s of sign(s) * prod_i
// x[i, s(i)], as one gather by a constant table of the M! x M flat indices,
// a product and a signed sum. Exact in the sense that matters for the small
// matrices it is for (rotations, 2x2 and 3x3 covariances); larger orders are
// Unimplemented rather than slow or unstable.
absl::Status ConvertDet(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  const int64_t rank = x->type.rank();
  if (rank < 2 || x->type.shape[rank - 1] != x->type.shape[rank - 2] ||
      !IsFloatDType(x->type.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        What(n), ": wants float square matrices [..., M, M], got ", x->type.ToString()));
  }
  const int64_t m = x->type.shape[rank - 1];
  if (m > kMaxDetOrder) {
    return absl::UnimplementedError(absl::StrCat(What(n), ": ", m, " x ", m,
                                                 " determinants (Kiln computes up to ",
                                                 kMaxDetOrder, " x ", kMaxDetOrder, ")"));
  }
  std::vector<int64_t> perm(m);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<int64_t> table;  // M! rows of M flat indices i * M + s(i)
  std::vector<double> signs;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < m; ++i) {
      table.push_back(i * m + perm[i]);
      for (int64_t j = i + 1; j < m; ++j) inversions += perm[i] > perm[j];
    }
    signs.push_back(inversions % 2 == 0 ? 1.0 : -1.0);
  } while (std::next_permutation(perm.begin(), perm.end()));
  const int64_t terms = static_cast<int64_t>(signs.size());

  std::vector<int64_t> flat_shape(x->type.shape.begin(), x->type.shape.end() - 2);
  const std::vector<int64_t> batch = flat_shape;
  flat_shape.push_back(m * m);
  KILN_ASSIGN_OR_RETURN(Node* flat, c.Add(n, "reshape", {x}, ReshapeAttrs{flat_shape}, "/flat"));
  Node* at =
      c.Constant(n.name() + "/permutations", TensorType{DType::kInt64, {terms, m}}, table.data());
  const int64_t last = static_cast<int64_t>(batch.size());
  KILN_ASSIGN_OR_RETURN(Node* picked, c.Add(n, "gather", {flat, at}, AxisAttrs{last}, "/picked"));
  KILN_ASSIGN_OR_RETURN(Node* products,
                        c.Add(n, "prod", {picked}, ReduceAttrs{{last + 1}, false}, "/products"));
  const TensorType sign_type{x->type.dtype, {terms}};
  std::string sign_bytes(sign_type.ByteSize(), '\0');
  for (int64_t t = 0; t < terms; ++t) {
    WriteElementFromDouble(x->type.dtype, sign_bytes.data(), t, signs[t]);
  }
  Node* sign = c.Constant(n.name() + "/signs", sign_type, sign_bytes.data());
  KILN_ASSIGN_OR_RETURN(Node* signed_terms,
                        c.Add(n, "mul", {products, sign}, NoAttrs{}, "/signed"));
  KILN_ASSIGN_OR_RETURN(Node* y, c.Add(n, "sum", {signed_terms}, ReduceAttrs{{last}, false}));
  return c.Define(n.output(0), y);
}

}  // namespace

void AddComposedConverters(ConverterMap& table) {
  table["MaxUnpool"] = ConvertMaxUnpool;
  table["Det"] = ConvertDet;
}

}  // namespace kiln::onnx_import
