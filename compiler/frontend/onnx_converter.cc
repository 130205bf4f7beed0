#include "compiler/frontend/onnx_converter.h"

#include <algorithm>
#include <cstring>

namespace kiln::onnx_import {
namespace {

// The elements of `t`'s typed data field into `data` (typed by `t`). ONNX
// keeps each type in one field: float_data, double_data, int64_data,
// uint64_data (UINT32, UINT64), and int32_data for the rest, one element per
// entry (FLOAT16 and BFLOAT16 as their 16-bit patterns). A count that does
// not match the shape is caught by the caller.
absl::Status CopyTypedData(const onnx::TensorProto& t, ConstantData& data) {
  const DType dtype = data.type.dtype;
  auto fill = [&](int64_t count, auto&& write) {
    data.bytes.assign(count * DTypeSize(dtype), '\0');
    for (int64_t i = 0; i < count; ++i) write(i);
  };
  switch (dtype) {
    case DType::kFloat32:
      data.bytes.assign(reinterpret_cast<const char*>(t.float_data().data()),
                        t.float_data_size() * sizeof(float));
      break;
    case DType::kFloat64:
      data.bytes.assign(reinterpret_cast<const char*>(t.double_data().data()),
                        t.double_data_size() * sizeof(double));
      break;
    case DType::kInt64:
      data.bytes.assign(reinterpret_cast<const char*>(t.int64_data().data()),
                        t.int64_data_size() * sizeof(int64_t));
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      fill(t.uint64_data_size(), [&](int64_t i) {
        WriteElementFromInt(dtype, data.bytes.data(), i, static_cast<int64_t>(t.uint64_data(i)));
      });
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      fill(t.int32_data_size(), [&](int64_t i) {
        const uint16_t bits = static_cast<uint16_t>(t.int32_data(i));
        std::memcpy(data.bytes.data() + 2 * i, &bits, 2);
      });
      break;
    default:  // bool and the integers up to 32 bits
      fill(t.int32_data_size(),
           [&](int64_t i) { WriteElementFromInt(dtype, data.bytes.data(), i, t.int32_data(i)); });
      break;
  }
  return absl::OkStatus();
}

}  // namespace

bool KeepsDataOutside(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

absl::StatusOr<DType> ConvertElemType(int32_t elem, const std::string& what) {
  switch (elem) {
    case onnx::TensorProto::FLOAT: return DType::kFloat32;
    case onnx::TensorProto::INT64: return DType::kInt64;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case onnx::TensorProto::FLOAT16: return DType::kFloat16;
    case onnx::TensorProto::BFLOAT16: return DType::kBFloat16;
    case onnx::TensorProto::DOUBLE: return DType::kFloat64;
    case onnx::TensorProto::INT8: return DType::kInt8;
    case onnx::TensorProto::UINT8: return DType::kUInt8;
    case onnx::TensorProto::INT16: return DType::kInt16;
    case onnx::TensorProto::UINT16: return DType::kUInt16;
    case onnx::TensorProto::INT32: return DType::kInt32;
    case onnx::TensorProto::UINT32: return DType::kUInt32;
    case onnx::TensorProto::UINT64: return DType::kUInt64;
    default:
      return absl::UnimplementedError(absl::StrCat(
          what, ": element type ", onnx::TensorProto::DataType_Name(elem),
          " is not supported (strings and complex numbers are not; every numeric type and "
          "BOOL are)"));
  }
}

// `t`'s data as a constant; with `take`, raw data moves out of `*take` (the
// same tensor, owned by the caller) instead of being copied: a 45 MB model's
// weights were copied, and their pages faulted in, once more per import.
absl::StatusOr<std::shared_ptr<ConstantData>> ConvertTensor(const onnx::TensorProto& t,
                                                            onnx::TensorProto* take) {
  const std::string what = absl::StrCat("tensor '", t.name(), "'");
  if (KeepsDataOutside(t)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " keeps its data in an external file; Kiln accepts only "
                           "self-contained models"));
  }
  auto data = std::make_shared<ConstantData>();
  KILN_ASSIGN_OR_RETURN(data->type.dtype, ConvertElemType(t.data_type(), what));
  data->type.shape.assign(t.dims().begin(), t.dims().end());
  absl::StatusOr<int64_t> n = CheckedNumElements(data->type.shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
  const int64_t bytes = *n * DTypeSize(data->type.dtype);
  if (t.has_raw_data() && take != nullptr) {
    data->bytes = std::move(*take->mutable_raw_data());
  } else if (t.has_raw_data()) {
    data->bytes = t.raw_data();
  } else {
    KILN_RETURN_IF_ERROR(CopyTypedData(t, *data));
  }
  if (static_cast<int64_t>(data->bytes.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of shape ",
                                                   ShapeToString(data->type.shape), " needs ",
                                                   bytes, " bytes of data, has ",
                                                   data->bytes.size()));
  }
  return data;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
std::string StringAttr(const onnx::NodeProto& n, const std::string& name,
                       const std::string& fallback) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a != nullptr && a->has_s() ? a->s() : fallback;
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a ? a->i() : fallback;
}
float FloatAttr(const onnx::NodeProto& n, const std::string& name, float fallback) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a ? a->f() : fallback;
}
// An axis attribute of a tensor of rank `rank`, made non-negative: in
// [-rank, rank) (or up to rank itself where one past the last axis is
// meaningful, as Flatten's). Anything else names the node: an axis read
// unchecked indexed past the shape.
absl::StatusOr<int64_t> AxisAttr(const onnx::NodeProto& n, const std::string& name,
                                 int64_t fallback, int64_t rank, bool one_past_last) {
  const int64_t axis = IntAttr(n, name, fallback);
  const int64_t high = one_past_last ? rank : rank - 1;
  if (axis < -rank || axis > high) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                   "): ", name, " ", axis, " is outside ",
                                                   -rank, "..", high, " for a rank-", rank,
                                                   " input"));
  }
  return axis < 0 ? axis + rank : axis;
}
std::vector<int64_t> IntsAttr(const onnx::NodeProto& n, const std::string& name,
                              std::vector<int64_t> fallback) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
// auto_pad SAME_UPPER / SAME_LOWER along one dim: the output is
// ceil(input / stride), the padding that takes split with the odd one at the
// end (UPPER) or the start (LOWER). {begin, end}.
std::pair<int64_t, int64_t> SamePadding(int64_t in, int64_t kernel, int64_t stride,
                                        int64_t dilation, bool upper) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - in);
  const int64_t begin = upper ? total / 2 : total - total / 2;
  return {begin, total - begin};
}

// A 2-D window's (Conv, pooling) strides, dilations and pads as auto_pad below
// and the op's shape relation index them: 2, 2 and 4 values, pads >= 0, as the
// Kiln graph's parser checks. libonnx's shape inference lets other lengths
// through: pads of 3 values were read past their end.
absl::Status CheckWindowAttrs(const onnx::NodeProto& n, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dilations,
                              const std::vector<int64_t>& pads) {
  const std::string node = absl::StrCat("node '", n.name(), "' (", n.op_type(), "): ");
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        node, "a 2-D window takes 2 strides, 2 dilations and 4 pads, got ", strides.size(),
        ", ", dilations.size(), " and ", pads.size()));
  }
  for (int64_t p : pads) {
    if (p < 0) return absl::InvalidArgumentError(absl::StrCat(node, "pads must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Node*> OptionalValue(Converter& c, const onnx::NodeProto& n, int i) {
  if (!c.HasInput(n, i)) return nullptr;
  return c.Value(n, i);
}

}  // namespace kiln::onnx_import
