#include "client/element_type.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/half_float.h"

namespace kiln::client {
namespace {

using Kind = ElementType::Kind;

constexpr ElementType kTypes[] = {
    {"FP16", "<f2", 2, Kind::kFloat},    {"FP32", "<f4", 4, Kind::kFloat},
    {"FP64", "<f8", 8, Kind::kFloat},    {"BF16", "", 2, Kind::kFloat},
    {"INT8", "|i1", 1, Kind::kSigned},   {"UINT8", "|u1", 1, Kind::kUnsigned},
    {"INT16", "<i2", 2, Kind::kSigned},  {"UINT16", "<u2", 2, Kind::kUnsigned},
    {"INT32", "<i4", 4, Kind::kSigned},  {"UINT32", "<u4", 4, Kind::kUnsigned},
    {"INT64", "<i8", 8, Kind::kSigned},  {"UINT64", "<u8", 8, Kind::kUnsigned},
    {"BOOL", "|b1", 1, Kind::kBool},
};

template <typename T>
T Load(absl::string_view data, size_t i) {
  T v;
  std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
  return v;
}

int64_t SignedAt(const ElementType& type, absl::string_view data, size_t i) {
  switch (type.size) {
    case 1:
      return Load<int8_t>(data, i);
    case 2:
      return Load<int16_t>(data, i);
    case 4:
      return Load<int32_t>(data, i);
    default:
      return Load<int64_t>(data, i);
  }
}

uint64_t UnsignedAt(const ElementType& type, absl::string_view data, size_t i) {
  switch (type.size) {
    case 1:
      return Load<uint8_t>(data, i);
    case 2:
      return Load<uint16_t>(data, i);
    case 4:
      return Load<uint32_t>(data, i);
    default:
      return Load<uint64_t>(data, i);
  }
}

}  // namespace

const ElementType* FindElementType(absl::string_view datatype) {
  for (const ElementType& t : kTypes) {
    if (t.datatype == datatype) return &t;
  }
  return nullptr;
}

const ElementType* FindNpyElementType(absl::string_view descr) {
  for (const ElementType& t : kTypes) {
    if (t.npy_descr.empty()) continue;
    if (t.npy_descr == descr) return &t;
    // NumPy writes '|' for one-byte types; '<', '>' and '=' mean the same there.
    if (t.size == 1 && descr.size() == 3 && descr.substr(1) == t.npy_descr.substr(1) &&
        (descr[0] == '<' || descr[0] == '>' || descr[0] == '=')) {
      return &t;
    }
  }
  return nullptr;
}

std::string NpyDescrList() {
  std::string out;
  for (const ElementType& t : kTypes) {
    if (!t.npy_descr.empty()) absl::StrAppend(&out, out.empty() ? "" : " ", t.npy_descr);
  }
  return out;
}

double ElementAsDouble(const ElementType& type, absl::string_view data, size_t i) {
  switch (type.kind) {
    case Kind::kFloat:
      if (type.datatype == "FP16") return HalfToFloat(Load<uint16_t>(data, i));
      if (type.datatype == "BF16") return BFloat16ToFloat(Load<uint16_t>(data, i));
      if (type.size == 4) return Load<float>(data, i);
      return Load<double>(data, i);
    case Kind::kSigned:
      return static_cast<double>(SignedAt(type, data, i));
    case Kind::kUnsigned:
      return static_cast<double>(UnsignedAt(type, data, i));
    case Kind::kBool:
      return data[i] != 0 ? 1 : 0;
  }
  return 0;
}

std::string FormatElement(const ElementType& type, absl::string_view data, size_t i) {
  switch (type.kind) {
    case Kind::kFloat:
      return absl::StrFormat("%.6g", ElementAsDouble(type, data, i));
    case Kind::kSigned:
      return absl::StrCat(SignedAt(type, data, i));
    case Kind::kUnsigned:
      return absl::StrCat(UnsignedAt(type, data, i));
    case Kind::kBool:
      return data[i] != 0 ? "true" : "false";
  }
  return "?";
}

}  // namespace kiln::client
