#include "client/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/element_type.h"
#include "common/half_float.h"

namespace kiln::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxElements = int64_t{1} << 36;

// The value text after `'key':` in the header dict, up to the matching end.
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("npy header has no ", quoted));
  }
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) return absl::InvalidArgumentError("npy header is malformed");
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(at + 1));
  size_t end;
  if (!rest.empty() && rest[0] == '(') {
    end = rest.find(')');
    if (end == absl::string_view::npos) return absl::InvalidArgumentError("unterminated shape");
    return std::string(rest.substr(0, end + 1));
  }
  if (!rest.empty() && rest[0] == '\'') {
    end = rest.find('\'', 1);
    if (end == absl::string_view::npos) return absl::InvalidArgumentError("unterminated string");
    return std::string(rest.substr(0, end + 1));
  }
  end = rest.find_first_of(",}");
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view text) {
  // "(2, 3)", "(4,)", "()"
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("npy shape '", text, "' is not a tuple"));
  }
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("npy shape has a bad dimension '", part, "'"));
    }
    if (d != 0 && elements > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat("npy shape ", text, " is too large"));
    }
    elements *= d;
    shape.push_back(d);
  }
  return shape;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len;
  size_t offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    header_len = 0;
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    offset = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(".npy version ", major, " is not supported"));
  }
  if (bytes.size() < offset + header_len) return absl::InvalidArgumentError("truncated .npy header");
  absl::string_view header = bytes.substr(offset, header_len);

  NpyArray array;
  absl::StatusOr<std::string> descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  const ElementType* type = nullptr;
  if (descr->size() >= 2 && descr->front() == '\'' && descr->back() == '\'') {
    type = FindNpyElementType(absl::string_view(*descr).substr(1, descr->size() - 2));
  }
  if (type == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("npy dtype ", *descr,
                                                   " is not supported (little-endian ",
                                                   NpyDescrList(), ")"));
  }
  array.datatype = std::string(type->datatype);
  const int64_t item = static_cast<int64_t>(type->size);
  absl::StatusOr<std::string> fortran = DictValue(header, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") {
    return absl::InvalidArgumentError("npy array is in Fortran order; save it C-contiguous");
  }
  absl::StatusOr<std::string> shape_text = DictValue(header, "shape");
  if (!shape_text.ok()) return shape_text.status();
  absl::StatusOr<std::vector<int64_t>> shape = ParseShape(*shape_text);
  if (!shape.ok()) return shape.status();
  array.shape = *shape;
  int64_t elements = 1;
  for (int64_t d : array.shape) elements *= d;
  const size_t data_offset = offset + header_len;
  const uint64_t want = static_cast<uint64_t>(elements) * item;
  if (bytes.size() - data_offset != want) {
    return absl::InvalidArgumentError(absl::StrCat("npy data is ", bytes.size() - data_offset,
                                                   " bytes; shape ", *shape_text, " needs ", want));
  }
  array.data = std::string(bytes.substr(data_offset));
  return array;
}

std::string SerializeNpy(const NpyArray& array) {
  const ElementType* type = FindElementType(array.datatype);
  std::vector<int64_t> dims = array.shape;
  absl::string_view descr = "|u1";
  std::string widened;  // BF16 as float32
  absl::string_view data = array.data;
  if (type == nullptr) {
    dims = {static_cast<int64_t>(array.data.size())};
  } else if (type->datatype == "BF16") {
    descr = "<f4";
    for (size_t i = 0; i < array.data.size() / 2; ++i) {
      uint16_t h;
      std::memcpy(&h, array.data.data() + i * 2, 2);
      const float f = BFloat16ToFloat(h);
      widened.append(reinterpret_cast<const char*>(&f), 4);
    }
    data = widened;
  } else {
    descr = type->npy_descr;
  }
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    absl::StrAppend(&shape, dims[i], dims.size() == 1 ? "," : (i + 1 < dims.size() ? ", " : ""));
  }
  shape += ")";
  std::string header = absl::StrCat("{'descr': '", descr,
                                    "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(data.data(), data.size());
  return out;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<NpyArray> array = ParseNpy(ss.str());
  if (!array.ok()) {
    return absl::Status(array.status().code(), absl::StrCat(path, ": ", array.status().message()));
  }
  return array;
}

absl::Status WriteNpyFile(const std::string& path, const NpyArray& array) {
  if (FindElementType(array.datatype) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": datatype '", array.datatype, "' has no .npy form"));
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  const std::string bytes = SerializeNpy(array);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat("failed writing ", path));
  return absl::OkStatus();
}

NpyArray Float32ToBFloat16(NpyArray array) {
  if (array.datatype != "FP32") return array;
  std::string narrow(array.data.size() / 2, '\0');
  for (size_t i = 0; i < array.data.size() / 4; ++i) {
    float f;
    std::memcpy(&f, array.data.data() + i * 4, 4);
    const uint16_t h = FloatToBFloat16(f);
    std::memcpy(&narrow[i * 2], &h, 2);
  }
  array.datatype = "BF16";
  array.data = std::move(narrow);
  return array;
}

}  // namespace kiln::client
