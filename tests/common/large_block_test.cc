// AllocateLargeBlock: small blocks at the asked alignment, large ones on a
// huge-page boundary and, where the kernel's transparent huge pages are not
// off, in a mapping the kernel reports as eligible for them
// (/proc/self/smaps' THPeligible, the kernel's own answer).
#include "common/large_block.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

// The THPeligible line of the mapping holding `p`, or -1 if none says.
int ThpEligible(const void* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

bool ThpOff() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(mode)), std::istreambuf_iterator<char>());
  return text.empty() || text.find("[never]") != std::string::npos;
}

TEST(LargeBlockTest, SmallBlocksKeepTheirAlignment) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kHugePage - 64}) {
    void* p = AllocateLargeBlock(bytes, 64);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0x5a, bytes);
    std::free(p);
  }
}

TEST(LargeBlockTest, LargeBlocksStartOnAHugePageAndMayUseThem) {
  const size_t bytes = 3 * kHugePage + 4096;  // a tail beyond the whole huge pages
  void* p = AllocateLargeBlock(bytes, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u);
  auto* bytes_at = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; i += 4096) bytes_at[i] = static_cast<unsigned char>(i >> 12);
  for (size_t i = 0; i < bytes; i += 4096) {
    ASSERT_EQ(bytes_at[i], static_cast<unsigned char>(i >> 12)) << i;
  }
  const bool off = ThpOff();
  if (!off) EXPECT_EQ(ThpEligible(p), 1);
  std::free(p);
  if (off) GTEST_SKIP() << "transparent huge pages are off on this kernel";
}

}  // namespace
}  // namespace kiln
