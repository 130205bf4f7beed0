#include "tests/test_util/npy_fixture.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace kiln::testing {
namespace {

// The text after `'key':` in the header dict, up to the next top-level ',' or '}'.
absl::StatusOr<absl::string_view> DictValue(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "':");
  const size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("header has no '", key, "'"));
  }
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(at + quoted.size()));
  size_t end = 0;
  int depth = 0;
  for (; end < rest.size(); ++end) {
    if (rest[end] == '(') ++depth;
    if (rest[end] == ')') --depth;
    if (depth == 0 && (rest[end] == ',' || rest[end] == '}')) break;
  }
  return absl::StripTrailingAsciiWhitespace(rest.substr(0, end));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("bad shape ", text));
  }
  std::vector<int64_t> shape;
  for (absl::string_view dim : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    dim = absl::StripAsciiWhitespace(dim);
    if (dim.empty()) continue;  // "(4,)" and "()"
    int64_t d;
    if (!absl::SimpleAtoi(dim, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad dim '", dim, "'"));
    }
    shape.push_back(d);
  }
  return shape;
}

absl::StatusOr<NpyFloat32> Parse(absl::string_view file) {
  static constexpr absl::string_view kMagic("\x93NUMPY", 6);
  if (file.size() < 10 || file.substr(0, 6) != kMagic) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(file[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(file[8]) | static_cast<unsigned char>(file[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return absl::InvalidArgumentError("truncated header");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = header_len << 8 | static_cast<unsigned char>(file[8 + i]);
    offset = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown .npy version ", major));
  }
  if (file.size() < offset + header_len) return absl::InvalidArgumentError("truncated header");
  const absl::string_view header = file.substr(offset, header_len);

  absl::StatusOr<absl::string_view> descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  if (*descr != "'<f4'") {
    return absl::InvalidArgumentError(absl::StrCat("dtype ", *descr, ", want '<f4'"));
  }
  absl::StatusOr<absl::string_view> fortran = DictValue(header, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") return absl::InvalidArgumentError("Fortran order is not supported");
  absl::StatusOr<absl::string_view> shape_text = DictValue(header, "shape");
  if (!shape_text.ok()) return shape_text.status();
  absl::StatusOr<std::vector<int64_t>> shape = ParseShape(*shape_text);
  if (!shape.ok()) return shape.status();

  NpyFloat32 out;
  out.shape = *std::move(shape);
  int64_t count = 1;
  for (int64_t d : out.shape) count *= d;
  const absl::string_view data = file.substr(offset + header_len);
  if (data.size() != static_cast<size_t>(count) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape needs ", count * sizeof(float), " data bytes, file has ", data.size()));
  }
  out.values.resize(count);
  std::memcpy(out.values.data(), data.data(), data.size());  // the host is little-endian
  return out;
}

}  // namespace

absl::StatusOr<NpyFloat32> ReadNpyFloat32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<NpyFloat32> parsed = Parse(contents.str());
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace kiln::testing
