// What every `--json` output of kiln shares: one JSON object per run whose
// first field is "schema_version" (kJsonSchemaVersion), so a script can tell
// which layout it reads. The layouts are documented in README.md ("kiln --json
// output"); a field is added without a new version, anything else bumps it.
#ifndef KILN_CLIENT_JSON_OUTPUT_H_
#define KILN_CLIENT_JSON_OUTPUT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "client/element_type.h"
#include "google/protobuf/message.h"

namespace kiln::client {

inline constexpr int kJsonSchemaVersion = 1;

// `object` (a JSON object's text) with "schema_version" as its first field.
std::string WithSchemaVersion(absl::string_view object);

// A service message as a --json document: proto field names, default values
// shown, and protobuf's JSON mapping (64-bit integers are strings).
std::string JsonDocument(const google::protobuf::Message& message);

// `s` as a JSON string literal, quotes and control characters escaped.
std::string JsonQuote(absl::string_view s);

// Element i as a JSON value that reads back exactly: floats with enough
// digits for their type, NaN and infinities as the strings "NaN",
// "Infinity", "-Infinity" (as protobuf's JSON does), BOOL true or false.
std::string JsonElement(const ElementType& type, absl::string_view data, size_t i);

}  // namespace kiln::client

#endif  // KILN_CLIENT_JSON_OUTPUT_H_
