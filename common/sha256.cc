#include "common/sha256.h"

#include <array>
#include <cstdint>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SHA256.h"

namespace kiln {

std::string Sha256(absl::string_view data) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  return std::string(digest.begin(), digest.end());
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
