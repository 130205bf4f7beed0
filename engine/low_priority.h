// Runs work on a thread of lower scheduling priority (a higher nice value),
// and waits for it. Compiles run so: with two cores, a burst of compiles at
// the same priority as inference pushed inference p99 from under 1 ms to
// 126 ms (issue 20). Threads the work starts inherit its priority. A new
// thread per call (tens of microseconds, against milliseconds of compile)
// because an unprivileged thread cannot raise its priority back.
#ifndef KILN_ENGINE_LOW_PRIORITY_H_
#define KILN_ENGINE_LOW_PRIORITY_H_

#include <functional>

namespace kiln::engine {

// `nice`: added to the caller's nice value (0 runs `work` on the calling
// thread, as it was).
void RunAtLowerPriority(int nice, const std::function<void()>& work);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_LOW_PRIORITY_H_
