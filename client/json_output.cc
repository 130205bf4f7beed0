#include "client/json_output.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report_format.h"

namespace kiln::client {

std::string WithSchemaVersion(absl::string_view object) {
  // On the object's first line: a one-line document (`kiln bench --json`,
  // read a line at a time) stays one line.
  const std::string field = absl::StrCat("\"schema_version\": ", kJsonSchemaVersion);
  const size_t open = object.find('{');
  if (open == absl::string_view::npos) return absl::StrCat("{", field, "}");
  const size_t first = object.find_first_not_of(" \t\r\n", open + 1);
  const bool empty = first == absl::string_view::npos || object[first] == '}';
  const bool newline = open + 1 < object.size() && object[open + 1] == '\n';
  return absl::StrCat(object.substr(0, open + 1), field,
                      empty     ? ""
                      : newline ? ","
                                : ", ",
                      object.substr(open + 1));
}

std::string JsonDocument(const google::protobuf::Message& message) {
  return WithSchemaVersion(ToJson(message));
}

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

std::string JsonElement(const ElementType& type, absl::string_view data, size_t i) {
  if (type.kind != ElementType::Kind::kFloat) return FormatElement(type, data, i);
  const double v = ElementAsDouble(type, data, i);
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  // 9 significant digits round-trip a float32 (and so FP16 and BF16), 17 a double.
  return absl::StrFormat(type.size == 8 ? "%.17g" : "%.9g", v);
}

}  // namespace kiln::client
