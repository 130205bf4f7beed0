// Wall time since a steady_clock point, in milliseconds: how every compile
// and load time in Kiln's reports is measured; and the steady clock in ns.
#ifndef KILN_COMMON_MS_SINCE_H_
#define KILN_COMMON_MS_SINCE_H_

#include <chrono>
#include <cstdint>

namespace kiln {

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Steady-clock nanoseconds: timestamps for per-phase durations.
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln

#endif  // KILN_COMMON_MS_SINCE_H_
