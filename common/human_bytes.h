// Byte counts as people read them in messages and logs: "300 bytes",
// "12.5 KiB", "64.0 MiB", "128.0 GiB".
#ifndef KILN_COMMON_HUMAN_BYTES_H_
#define KILN_COMMON_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln {

inline std::string HumanBytes(int64_t bytes) {
  if (bytes < 1024 && bytes > -1024) return absl::StrCat(bytes, " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while ((value >= 1024 || value <= -1024) && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

}  // namespace kiln

#endif  // KILN_COMMON_HUMAN_BYTES_H_
