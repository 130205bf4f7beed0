#include "server/usable_memory.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(UsableMemoryTest, AtMostPhysicalMemoryAndTheDefaultBudgetIsThreeQuartersOfIt) {
  const int64_t physical = int64_t{::sysconf(_SC_PHYS_PAGES)} * ::sysconf(_SC_PAGE_SIZE);
  const int64_t usable = UsableMemoryBytes();
  EXPECT_GT(usable, 0);
  EXPECT_LE(usable, physical);
  EXPECT_EQ(DefaultMaxLoadedBytes(), usable / 4 * 3);
}

}  // namespace
}  // namespace kiln::server
