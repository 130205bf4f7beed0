// Kiln's version, as the servers report it. It is part of every kernel cache
// key, so it changes whenever the kernels Kiln generates for a group do:
// otherwise a disk cache keeps serving the previous schedules.
#ifndef KILN_COMMON_VERSION_H_
#define KILN_COMMON_VERSION_H_

namespace kiln {

inline constexpr char kKilnVersion[] = "0.4.38";

}  // namespace kiln

#endif  // KILN_COMMON_VERSION_H_
