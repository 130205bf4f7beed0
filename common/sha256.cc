#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace kiln {

std::string Sha256(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1 ||
      size != 32) {
    std::abort();  // only when libcrypto itself is broken
  }
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string Sha256Hex(absl::string_view data) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : Sha256(data)) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace kiln
