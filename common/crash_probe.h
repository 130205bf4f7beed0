// Runs code that might crash the process (third-party code on untrusted
// input: libonnx's checker and shape inference crashed on hostile models,
// issue 20) first in a forked child, so that a crash kills the child, not
// the server. The child shares nothing back but how it ended and, when the
// work threw, the exception's message; a caller that needs the work's
// results runs it again in process once the child has shown it does not
// crash on this input (the work must be deterministic).
#ifndef KILN_COMMON_CRASH_PROBE_H_
#define KILN_COMMON_CRASH_PROBE_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

// How `work` ended in the child, when it did not crash.
enum class ProbeEnd { kReturned, kThrew };

// A child running `work` while the caller goes on: the caller does its own
// part meanwhile (the importer converts the model the child checks) and
// waits for the verdict when it needs it. A probe dropped unwaited kills and
// reaps its child.
class CrashProbe {
 public:
  // Forks the child. Unavailable when no child could be made (fork failed),
  // so the caller may decide.
  static absl::StatusOr<CrashProbe> Start(const std::function<void()>& work);

  CrashProbe(CrashProbe&& other) noexcept;
  CrashProbe& operator=(CrashProbe&&) = delete;
  CrashProbe(const CrashProbe&) = delete;
  ~CrashProbe();

  // How `work` ended; Internal naming the signal when the child crashed, or
  // DeadlineExceeded when it ran past `timeout` from now (it is killed).
  // Once only.
  absl::StatusOr<ProbeEnd> Wait(absl::Duration timeout);

  // After Wait gave kThrew: what() of the std::exception thrown (its first
  // kMaxMessageBytes), or "" for anything else thrown.
  const std::string& thrown_message() const { return thrown_message_; }
  static constexpr size_t kMaxMessageBytes = 4096;

 private:
  CrashProbe(pid_t child, int pidfd, int message_fd)
      : child_(child), pidfd_(pidfd), message_fd_(message_fd) {}
  void KillAndReap();

  pid_t child_;     // -1 once waited for
  int pidfd_;       // -1 where the kernel has no pidfd_open
  int message_fd_;  // the read end of the child's message pipe, or -1
  std::string thrown_message_;
};

}  // namespace kiln

#endif  // KILN_COMMON_CRASH_PROBE_H_
