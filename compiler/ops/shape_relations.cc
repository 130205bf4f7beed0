#include "compiler/ops/shape_relations.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln {

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", ShapeToString(a), " and ",
                                                     ShapeToString(b),
                                                     " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::Status RequireDType(const std::vector<TensorType>& types, DType dtype) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].dtype != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " has dtype ",
                                                     DTypeName(types[i].dtype), ", expected ",
                                                     DTypeName(dtype)));
    }
  }
  return absl::OkStatus();
}

absl::Status RequireFloat(const std::vector<TensorType>& types) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (!IsFloatDType(types[i].dtype) || types[i].dtype != types[0].dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, " has dtype ", DTypeName(types[i].dtype), ", expected ",
          IsFloatDType(types[0].dtype) ? DTypeName(types[0].dtype)
                                       : "a float type (float16, bfloat16, float32, float64)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ConvOutputExtent(absl::string_view op, int64_t input, int64_t pad_begin,
                                         int64_t pad_end, int64_t kernel, int64_t dilation,
                                         int64_t stride) {
  const int64_t padded = input + pad_begin + pad_end;
  const int64_t window = dilation * (kernel - 1) + 1;
  if (padded < window) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " window ", window, " exceeds padded input ", padded));
  }
  return (padded - window) / stride + 1;
}

}  // namespace kiln
