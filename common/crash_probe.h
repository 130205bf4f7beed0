// Runs code that might crash the process (third-party code on untrusted
// input: libonnx's checker and shape inference crashed on hostile models,
// issue 20) first in a forked child, so that a crash kills the child, not
// the server. The child shares nothing back but how it ended; a caller that
// needs the work's results runs it again in process once the child has
// shown it does not crash on this input (the work must be deterministic).
#ifndef KILN_COMMON_CRASH_PROBE_H_
#define KILN_COMMON_CRASH_PROBE_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kiln {

// OK when `work` returned (or threw: the in-process run will say why) in
// the child; Internal naming the signal when the child crashed, or
// DeadlineExceeded when it ran past `timeout` (it is killed). Unavailable
// when no child could be made (fork failed), so the caller may decide.
absl::Status ProbeForCrash(const std::function<void()>& work, absl::Duration timeout);

}  // namespace kiln

#endif  // KILN_COMMON_CRASH_PROBE_H_
