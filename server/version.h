// Kiln's version, as the servers report it.
#ifndef KILN_SERVER_VERSION_H_
#define KILN_SERVER_VERSION_H_

namespace kiln::server {

inline constexpr char kKilnVersion[] = "0.1.0";

}  // namespace kiln::server

#endif  // KILN_SERVER_VERSION_H_
