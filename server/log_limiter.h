// A bound on how many lines a stream of events may log per second: failed
// calls are the client's to multiply, and one line each let any client fill
// the server's disk and bury what matters.
#ifndef KILN_SERVER_LOG_LIMITER_H_
#define KILN_SERVER_LOG_LIMITER_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace kiln::server {

class LogLimiter {
 public:
  // At most `lines_per_second` lines in each one-second window.
  explicit LogLimiter(int lines_per_second) : limit_(lines_per_second) {}

  // Whether an event at `now_ns` (a steady clock) may log. When it may and
  // earlier ones were held back, `*suppressed` says how many (else 0), so
  // the line can say so.
  bool Admit(int64_t now_ns, int64_t* suppressed);

 private:
  const int limit_;
  absl::Mutex mutex_;
  int64_t window_start_ns_ ABSL_GUARDED_BY(mutex_) = INT64_MIN;
  int admitted_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_LOG_LIMITER_H_
