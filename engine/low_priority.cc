#include "engine/low_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace kiln::engine {

void RunAtLowerPriority(int nice, const std::function<void()>& work) {
  if (nice <= 0) return work();
  std::thread thread([nice, &work] {
    const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
    errno = 0;
    const int current = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0) ::setpriority(PRIO_PROCESS, tid, current + nice);  // best effort
    work();
  });
  thread.join();
}

}  // namespace kiln::engine
