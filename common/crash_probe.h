// Runs code that might crash the process (third-party code on untrusted
// input: libonnx's checker and shape inference crashed on hostile models,
// issue 20) first in a forked child, so that a crash kills the child, not
// the server. The child shares nothing back but how it ended; a caller that
// needs the work's results, or the message of what it threw, runs it again
// in process once the child has shown it does not crash on this input (the
// work must be deterministic).
#ifndef KILN_COMMON_CRASH_PROBE_H_
#define KILN_COMMON_CRASH_PROBE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

// How `work` ended in the child, when it did not crash.
enum class ProbeEnd { kReturned, kThrew };

// How `work` ended in the child; Internal naming the signal when the child
// crashed, or DeadlineExceeded when it ran past `timeout` (it is killed).
// Unavailable when no child could be made (fork failed), so the caller may
// decide.
absl::StatusOr<ProbeEnd> ProbeForCrash(const std::function<void()>& work, absl::Duration timeout);

}  // namespace kiln

#endif  // KILN_COMMON_CRASH_PROBE_H_
