// Bytes -> DecodeDiskEntry, what DiskCache::Load runs on a file before its
// object is handed to the JIT. The entry's trailing SHA-256 would stop almost
// every mutation at the first check, so the input is taken as the entry's body
// and given a correct checksum: the parser behind the check is what is fuzzed.
// The raw bytes are decoded too (the checksum check itself), and an accepted
// entry must encode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/sha256.h"
#include "engine/disk_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  std::string why;
  (void)kiln::engine::DecodeDiskEntry(raw, &why);

  const std::string entry_bytes = raw + kiln::Sha256(raw);
  std::optional<kiln::engine::DiskEntry> entry =
      kiln::engine::DecodeDiskEntry(entry_bytes, &why);
  if (entry && kiln::engine::EncodeDiskEntry(*entry) != entry_bytes) {
    std::fprintf(stderr, "disk entry does not encode back to the bytes it was decoded from\n");
    std::abort();
  }
  return 0;
}
