#include "server/log_limiter.h"

namespace kiln::server {

bool LogLimiter::Admit(int64_t now_ns, int64_t* suppressed) {
  constexpr int64_t kWindowNs = 1'000'000'000;
  absl::MutexLock lock(&mutex_);
  *suppressed = 0;
  if (window_start_ns_ == INT64_MIN || now_ns - window_start_ns_ >= kWindowNs) {
    window_start_ns_ = now_ns;
    admitted_ = 0;
  }
  if (admitted_ >= limit_) {
    ++suppressed_;
    return false;
  }
  ++admitted_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace kiln::server
