// SHA-256, for what must hash the same in every process and build (cache
// keys, entry checksums): absl::Hash and std::hash are seeded per process.
// OpenSSL's implementation, behind a header that does not show it.
#ifndef KILN_COMMON_SHA256_H_
#define KILN_COMMON_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// The raw 32-byte digest of `data`.
std::string Sha256(absl::string_view data);

// The digest as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace kiln

#endif  // KILN_COMMON_SHA256_H_
