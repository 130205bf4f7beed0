// What a binary was built from, for `--version`: Kiln's version, the LLVM the
// tree compiles against and how this binary was compiled. Header-only so the
// client can say it without linking LLVM.
#ifndef KILN_COMMON_BUILD_INFO_H_
#define KILN_COMMON_BUILD_INFO_H_

#include <string>

#include "common/version.h"
#include "llvm/Config/llvm-config.h"

namespace kiln {

// The LLVM release Kiln's compiler in this build links (the server reports
// its own in GetServerInfo).
inline constexpr char kBuildLlvmVersion[] = LLVM_VERSION_STRING;

// "C++17, GCC 12.2.0, assertions on": the compiler and whether NDEBUG was set.
inline std::string BuildDescription() {
  std::string out = "C++" + std::to_string(__cplusplus / 100 % 100) + ", ";
#if defined(__clang__)
  out += "clang " __clang_version__;
#elif defined(__GNUC__)
  out += "GCC " __VERSION__;
#endif
#ifdef NDEBUG
  out += ", assertions off";
#else
  out += ", assertions on";
#endif
  return out;
}

// The lines `PROGRAM --version` prints.
inline std::string VersionText(const std::string& program) {
  return program + " " + kKilnVersion + "\nLLVM " + kBuildLlvmVersion +
         "\nbuild: " + BuildDescription();
}

}  // namespace kiln

#endif  // KILN_COMMON_BUILD_INFO_H_
