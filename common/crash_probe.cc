#include "common/crash_probe.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// The child's exit code when the work threw (an ordinary refusal, which
// the in-process run will report); 1 is what sanitizers exit with.
constexpr int kThrew = 42;

}  // namespace

absl::Status ProbeForCrash(const std::function<void()>& work, absl::Duration timeout) {
  const pid_t child = ::fork();
  if (child < 0) {
    return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(errno)));
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
    try {
      work();
    } catch (...) {
      ::_exit(kThrew);
    }
    ::_exit(0);
  }
  const absl::Time end = absl::Now() + timeout;
  absl::Duration wait = absl::Microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return absl::InternalError("lost the probe's child process");
    if (absl::Now() > end) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return absl::DeadlineExceededError(
          absl::StrCat("it ran for more than ", absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(wait));
    wait = std::min(wait * 2, absl::Milliseconds(20));
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("it crashed (signal ", WTERMSIG(status), ", ",
                                            ::strsignal(WTERMSIG(status)), ")"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != kThrew) {
    return absl::InternalError(absl::StrCat("it ended with exit code ", WEXITSTATUS(status)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
