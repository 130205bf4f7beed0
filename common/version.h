// Kiln's version, as the servers report it.
#ifndef KILN_COMMON_VERSION_H_
#define KILN_COMMON_VERSION_H_

namespace kiln {

inline constexpr char kKilnVersion[] = "0.3.0";

}  // namespace kiln

#endif  // KILN_COMMON_VERSION_H_
