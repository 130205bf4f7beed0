#include "common/crash_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// The child's exit code when the work threw (an ordinary refusal, its
// message sent through the pipe); 1 is what sanitizers exit with.
constexpr int kThrew = 42;

}  // namespace

absl::StatusOr<CrashProbe> CrashProbe::Start(const std::function<void()>& work) {
  // The child writes at most kMaxMessageBytes, far below a pipe's buffer,
  // so it never blocks on a parent that reads only after it ended.
  int message[2] = {-1, -1};
  if (::pipe2(message, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe failed: ", std::strerror(errno)));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(message[0]);
    ::close(message[1]);
    return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(error)));
  }
  if (child == 0) {
    // Only this thread exists here: run the work, touch nothing else, and
    // leave without atexit handlers or destructors. A crash here is
    // expected and must be quick: no core dump of a copy of the whole
    // server (a test's unlimited core size made one take a minute).
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    // The default action for faults, so that a crash ends the child by its
    // signal, whatever handlers the process installed (a sanitizer's turns
    // a fault into exit code 1).
    for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(signal, SIG_DFL);
    ::close(message[0]);
    try {
      work();
    } catch (const std::exception& e) {
      const size_t length = std::min(std::strlen(e.what()), kMaxMessageBytes);
      [[maybe_unused]] ssize_t written = ::write(message[1], e.what(), length);
      ::_exit(kThrew);
    } catch (...) {
      ::_exit(kThrew);
    }
    ::_exit(0);
  }
  ::close(message[1]);
  return CrashProbe(child, static_cast<int>(::syscall(SYS_pidfd_open, child, 0)), message[0]);
}

CrashProbe::CrashProbe(CrashProbe&& other) noexcept
    : child_(other.child_),
      pidfd_(other.pidfd_),
      message_fd_(other.message_fd_),
      thrown_message_(std::move(other.thrown_message_)) {
  other.child_ = -1;
  other.pidfd_ = -1;
  other.message_fd_ = -1;
}

CrashProbe::~CrashProbe() {
  if (child_ > 0) KillAndReap();
  if (pidfd_ >= 0) ::close(pidfd_);
  if (message_fd_ >= 0) ::close(message_fd_);
}

void CrashProbe::KillAndReap() {
  int status = 0;
  ::kill(child_, SIGKILL);
  ::waitpid(child_, &status, 0);
  child_ = -1;
}

absl::StatusOr<ProbeEnd> CrashProbe::Wait(absl::Duration timeout) {
  if (child_ <= 0) return absl::FailedPreconditionError("the probe was waited for already");
  const absl::Time end = absl::Now() + timeout;
  // A pidfd turns readable the moment the child ends, so the wait costs no
  // more than the work (the backed-off polling below overslept by up to
  // half the work's time: 14 ms for resnet18's ~8 ms of checks).
  absl::Duration wait = absl::Microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child_, &status, WNOHANG);
    if (done == child_) break;
    if (done < 0 && errno != EINTR) {
      child_ = -1;
      return absl::InternalError("lost the probe's child process");
    }
    const absl::Time now = absl::Now();
    if (now > end) {
      KillAndReap();
      return absl::DeadlineExceededError(
          absl::StrCat("it ran for more than ", absl::FormatDuration(timeout)));
    }
    if (pidfd_ >= 0) {
      pollfd ended = {pidfd_, POLLIN, 0};
      ::poll(&ended, 1, static_cast<int>(absl::ToInt64Milliseconds(end - now)) + 1);
    } else {
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(wait));
      wait = std::min(wait * 2, absl::Milliseconds(20));
    }
  }
  child_ = -1;
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("it crashed (signal ", WTERMSIG(status), ", ",
                                            ::strsignal(WTERMSIG(status)), ")"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kThrew) {
    // The child has ended: everything it wrote is in the pipe.
    char buffer[kMaxMessageBytes];
    for (;;) {
      const ssize_t n = ::read(message_fd_, buffer, sizeof buffer);
      if (n > 0 && thrown_message_.size() < kMaxMessageBytes) {
        thrown_message_.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    if (thrown_message_.size() > kMaxMessageBytes) thrown_message_.resize(kMaxMessageBytes);
    return ProbeEnd::kThrew;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("it ended with exit code ", WEXITSTATUS(status)));
  }
  return ProbeEnd::kReturned;
}

}  // namespace kiln
