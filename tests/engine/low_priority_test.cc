#include "engine/low_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

int ThisThreadsNice() {
  return ::getpriority(PRIO_PROCESS, static_cast<pid_t>(::syscall(SYS_gettid)));
}

TEST(LowPriorityTest, WorkRunsNicerAndTheCallerKeepsItsPriority) {
  const int before = ThisThreadsNice();
  int inside = -100, spawned = -100;
  RunAtLowerPriority(10, [&] {
    inside = ThisThreadsNice();
    std::thread child([&] { spawned = ThisThreadsNice(); });  // inherits it
    child.join();
  });
  EXPECT_EQ(inside, std::min(before + 10, 19));
  EXPECT_EQ(spawned, inside);
  EXPECT_EQ(ThisThreadsNice(), before);
  int same = -100;
  RunAtLowerPriority(0, [&] { same = ThisThreadsNice(); });
  EXPECT_EQ(same, before);
}

}  // namespace
}  // namespace kiln::engine
