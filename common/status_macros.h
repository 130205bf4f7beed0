// The few status helpers Abseil 20220623 lacks. Used across every Kiln layer.
#ifndef KILN_COMMON_STATUS_MACROS_H_
#define KILN_COMMON_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns `expr`'s status from the enclosing function when it is not OK.
#define KILN_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    if (::absl::Status _kiln_st = (expr); !_kiln_st.ok()) \
      return _kiln_st;                                  \
  } while (0)

#define KILN_STATUS_CONCAT_INNER(a, b) a##b
#define KILN_STATUS_CONCAT(a, b) KILN_STATUS_CONCAT_INNER(a, b)

// `KILN_ASSIGN_OR_RETURN(auto x, MakeX());` — binds the value or returns the error.
#define KILN_ASSIGN_OR_RETURN(lhs, rexpr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_STATUS_CONCAT(_kiln_or_, __LINE__), lhs, rexpr)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)

namespace kiln::internal {
[[noreturn]] inline void CheckFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "KILN_CHECK failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}
}  // namespace kiln::internal

// For Kiln's own invariants (bugs), never for anything input can cause.
#define KILN_CHECK(cond) \
  ((cond) ? (void)0 : ::kiln::internal::CheckFailed(#cond, __FILE__, __LINE__))

#endif  // KILN_COMMON_STATUS_MACROS_H_
