// The kernel cache key and its components (see the contract in cache_key.cc).
#ifndef KILN_ENGINE_CACHE_KEY_H_
#define KILN_ENGINE_CACHE_KEY_H_

#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/lower/lowered_program.h"

namespace kiln::engine {

// Bumped whenever the on-disk entry layout or the key's inputs change.
inline constexpr int kCacheFormatVersion = 1;

// What machine code depends on besides the kernel's structure.
struct TargetDescription {
  std::string triple;
  std::string cpu;
  std::string features;  // comma-separated, sorted
  std::string llvm_version;
  std::string kiln_version;

  static TargetDescription Host();
  bool operator==(const TargetDescription& o) const {
    return triple == o.triple && cpu == o.cpu && features == o.features &&
           llvm_version == o.llvm_version && kiln_version == o.kiln_version;
  }
};

struct KernelKey {
  std::string hex;        // SHA-256 of every component below
  std::string canonical;  // the group's canonical structure (KernelSpec::canonical)
  TargetDescription target;
  std::string options;    // CodegenOptions::ToString(), and " without <skipped loop passes>"

  // The full identity a hit must match, hash aside.
  bool SameIdentity(const KernelKey& o) const {
    return canonical == o.canonical && target == o.target && options == o.options;
  }
};

KernelKey MakeKernelKey(const KernelSpec& spec, const TargetDescription& target,
                        const codegen::CodegenOptions& options);

// Why `key` is not `neighbour`, for a miss: the differing components
// ("cpu skylake-avx512 vs icelake-server", "options O3 vs O1"), or, for a
// neighbour with the same ops, the first differing parameter type.
std::string ExplainDifference(const KernelKey& key, const KernelKey& neighbour);

// The ops of a canonical form, in order ("dense", "relu"): what makes a
// neighbour "the same ops with other shapes".
std::vector<std::string> CanonicalOps(const std::string& canonical);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_CACHE_KEY_H_
