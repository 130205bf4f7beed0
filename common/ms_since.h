// Wall time since a steady_clock point, in milliseconds: how every compile
// and load time in Kiln's reports is measured.
#ifndef KILN_COMMON_MS_SINCE_H_
#define KILN_COMMON_MS_SINCE_H_

#include <chrono>

namespace kiln {

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace kiln

#endif  // KILN_COMMON_MS_SINCE_H_
