// --inference_cpus: the list's grammar, the errors a user sees, and that a
// thread bound to one CPU reports exactly that CPU in its affinity mask.
#include "server/cpu_affinity.h"

#include <sched.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The CPUs this process may use, from the kernel rather than from the code
// under test.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(ParseCpuListTest, EmptyTextMeansUnbound) {
  auto cpus = ParseCpuList("");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_THAT(*cpus, IsEmpty());
}

TEST(ParseCpuListTest, SinglesRangesAndRepeatsComeOutSorted) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int a = allowed.front(), b = allowed.back();
  const std::string text = std::to_string(b) + "," + std::to_string(a) + "-" + std::to_string(a) +
                           "," + std::to_string(b);
  auto cpus = ParseCpuList(text);
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  if (a == b) {
    EXPECT_THAT(*cpus, ElementsAre(a));
  } else {
    EXPECT_THAT(*cpus, ElementsAre(a, b));
  }
}

TEST(ParseCpuListTest, RangeCoversEveryCpuBetween) {
  const std::vector<int> allowed = AllowedCpus();
  // Only meaningful where the allowed CPUs are contiguous (as on a plain
  // machine); a cpuset with holes is covered by the next test.
  if (allowed.back() - allowed.front() + 1 != static_cast<int>(allowed.size())) GTEST_SKIP();
  auto cpus = ParseCpuList(std::to_string(allowed.front()) + "-" + std::to_string(allowed.back()));
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(*cpus, allowed);
}

TEST(ParseCpuListTest, RejectsCpusTheProcessMayNotUse) {
  auto cpus = ParseCpuList("1000");
  ASSERT_FALSE(cpus.ok());
  EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cpus.status().message(), HasSubstr("may not run on CPU 1000"));
}

TEST(ParseCpuListTest, RejectsMalformedLists) {
  for (const char* text : {"x", "1,", ",1", "-1", "1-", "0-1-2", "0x1", "3-1"}) {
    auto cpus = ParseCpuList(text);
    EXPECT_FALSE(cpus.ok()) << text;
    EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(BindThisThreadToCpusTest, ThreadRunsOnlyOnTheChosenCpu) {
  const std::vector<int> process_cpus = AllowedCpus();
  const int cpu = process_cpus.back();
  std::vector<int> seen;
  // A thread of its own, so the test process keeps its mask.
  std::thread([&] {
    ASSERT_TRUE(BindThisThreadToCpus({cpu}).ok());
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) seen.push_back(c);
    }
  }).join();
  EXPECT_THAT(seen, ElementsAre(cpu));
  EXPECT_EQ(AllowedCpus(), process_cpus);  // the calling thread only
}

TEST(BindThisThreadToCpusTest, EmptyListLeavesTheMaskAlone) {
  std::vector<int> before, after;
  std::thread([&] {
    before = AllowedCpus();
    ASSERT_TRUE(BindThisThreadToCpus({}).ok());
    after = AllowedCpus();
  }).join();
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace kiln::server
