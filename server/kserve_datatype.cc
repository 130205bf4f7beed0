#include "server/kserve_datatype.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

constexpr std::pair<DType, absl::string_view> kNames[] = {
    {DType::kBool, "BOOL"},       {DType::kUInt8, "UINT8"},     {DType::kUInt16, "UINT16"},
    {DType::kUInt32, "UINT32"},   {DType::kUInt64, "UINT64"},   {DType::kInt8, "INT8"},
    {DType::kInt16, "INT16"},     {DType::kInt32, "INT32"},     {DType::kInt64, "INT64"},
    {DType::kFloat16, "FP16"},    {DType::kFloat32, "FP32"},    {DType::kFloat64, "FP64"},
    {DType::kBFloat16, "BF16"},
};

}  // namespace

std::string DatatypeName(DType dtype) {
  for (const auto& [d, name] : kNames) {
    if (d == dtype) return std::string(name);
  }
  return "?";
}

absl::StatusOr<DType> DTypeFromDatatype(absl::string_view datatype, absl::string_view tensor) {
  for (const auto& [d, name] : kNames) {
    if (name == datatype) return d;
  }
  // KServe's strings are BYTES; "STRING" is what a client reading ONNX's names would send.
  if (datatype == "BYTES" || datatype == "STRING") {
    return absl::UnimplementedError(
        absl::StrCat(tensor, " is ", datatype, ": Kiln serves numeric and bool tensors only"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(tensor, " has datatype '", datatype,
                   "', which KServe does not define (BOOL, UINT8..UINT64, INT8..INT64, FP16, "
                   "FP32, FP64, BF16)"));
}

}  // namespace kiln::server
