#include "common/crash_probe.h"

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// Start and Wait in one, as most of these cases need.
absl::StatusOr<ProbeEnd> ProbeForCrash(const std::function<void()>& work,
                                       absl::Duration timeout) {
  absl::StatusOr<CrashProbe> probe = CrashProbe::Start(work);
  if (!probe.ok()) return probe.status();
  return probe->Wait(timeout);
}

TEST(CrashProbeTest, WorkThatReturnsOrThrowsIsToldApart) {
  absl::StatusOr<ProbeEnd> returned = ProbeForCrash([] {}, absl::Seconds(10));
  ASSERT_TRUE(returned.ok()) << returned.status();
  EXPECT_EQ(*returned, ProbeEnd::kReturned);
  absl::StatusOr<ProbeEnd> threw =
      ProbeForCrash([] { throw std::runtime_error("bad model"); }, absl::Seconds(10));
  ASSERT_TRUE(threw.ok()) << threw.status();
  EXPECT_EQ(*threw, ProbeEnd::kThrew);
}

TEST(CrashProbeTest, WhatTheWorkThrewComesBackFromTheChild) {
  absl::StatusOr<CrashProbe> probe =
      CrashProbe::Start([] { throw std::invalid_argument("node 'x' has no input 0"); });
  ASSERT_TRUE(probe.ok()) << probe.status();
  absl::StatusOr<ProbeEnd> end = probe->Wait(absl::Seconds(10));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(*end, ProbeEnd::kThrew);
  EXPECT_EQ(probe->thrown_message(), "node 'x' has no input 0");

  const std::string long_message(3 * CrashProbe::kMaxMessageBytes, 'm');
  absl::StatusOr<CrashProbe> long_probe =
      CrashProbe::Start([&] { throw std::runtime_error(long_message); });
  ASSERT_TRUE(long_probe.ok());
  ASSERT_TRUE(long_probe->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ(long_probe->thrown_message(), long_message.substr(0, CrashProbe::kMaxMessageBytes));

  absl::StatusOr<CrashProbe> odd_probe = CrashProbe::Start([] { throw 7; });
  ASSERT_TRUE(odd_probe.ok());
  absl::StatusOr<ProbeEnd> odd_end = odd_probe->Wait(absl::Seconds(10));
  ASSERT_TRUE(odd_end.ok());
  EXPECT_EQ(*odd_end, ProbeEnd::kThrew);
  EXPECT_EQ(odd_probe->thrown_message(), "");
}

TEST(CrashProbeTest, AQuickChildIsSeenAtOnce) {
  // The wait follows the child's end, not a polling step: 50 short probes
  // in well under the 20 ms a backed-off poll could oversleep each.
  const absl::Time start = absl::Now();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(ProbeForCrash([] {}, absl::Seconds(10)).ok());
  }
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
}

TEST(CrashProbeTest, ACrashKillsTheChildNotThisProcess) {
  for (int signal : {SIGSEGV, SIGFPE, SIGABRT}) {
    absl::Status s =
        ProbeForCrash([signal] { std::raise(signal); }, absl::Seconds(10)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("signal " + std::to_string(signal)));
  }
  volatile int* null = nullptr;
  absl::Status s = ProbeForCrash([null] { *null = 1; }, absl::Seconds(10)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST(CrashProbeTest, WorkPastTheTimeoutIsKilled) {
  const absl::Time start = absl::Now();
  absl::Status s = ProbeForCrash([] { std::this_thread::sleep_for(std::chrono::seconds(30)); },
                                 absl::Milliseconds(200))
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(CrashProbeTest, TheCallerWorksWhileTheChildRuns) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CrashProbe> probe =
      CrashProbe::Start([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the caller's own part
  absl::StatusOr<ProbeEnd> end = probe->Wait(absl::Seconds(10));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(*end, ProbeEnd::kReturned);
  // Both parts ran at once: well under their 600 ms in sequence.
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(550));
  EXPECT_EQ(probe->Wait(absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CrashProbeTest, AProbeDroppedUnwaitedLeavesNoChild) {
  {
    absl::StatusOr<CrashProbe> probe =
        CrashProbe::Start([] { std::this_thread::sleep_for(std::chrono::seconds(30)); });
    ASSERT_TRUE(probe.ok()) << probe.status();
    CrashProbe moved = *std::move(probe);  // the moved-from one owns nothing
  }
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace kiln
