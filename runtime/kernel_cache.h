// Compiled kernels by structural key, so a group compiled once — in this model
// or any other — is never compiled again. See kernel_cache.cc.
#ifndef KILN_RUNTIME_KERNEL_CACHE_H_
#define KILN_RUNTIME_KERNEL_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compiler/codegen/codegen.h"
#include "compiler/program.h"
#include "runtime/jit_engine.h"

namespace kiln::runtime {

struct CacheLookup {
  std::shared_ptr<LoadedKernel> kernel;
  bool hit = false;
  // The original compile time (also on a hit: what the hit saved).
  double compile_ms = 0;
  std::string key_hex;
};

struct CacheEntryStats {
  std::string key_hex;
  std::vector<std::string> ops;
  int64_t hits = 0;
  double compile_ms = 0;
};

struct CacheStats {
  int64_t entries = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  double compile_ms_total = 0;
  double compile_ms_saved = 0;
  std::vector<CacheEntryStats> per_entry;
};

class KernelCache {
 public:
  explicit KernelCache(std::shared_ptr<JitEngine> jit) : jit_(std::move(jit)) {}

  // The kernel for `spec` under `options`: from the cache, or compiled (once,
  // however many callers ask at the same time) and remembered.
  absl::StatusOr<CacheLookup> GetOrCompile(const KernelSpec& spec,
                                           const codegen::CodegenOptions& options);
  CacheStats Stats() const;

  // The key: structural hash mixed with target and options, 16 hex digits.
  static std::string KeyHex(const KernelSpec& spec, const codegen::CodegenOptions& options);

 private:
  struct Entry {
    std::string identity;  // canonical form + target + options: the equality check
    std::vector<std::string> ops;
    std::shared_ptr<LoadedKernel> kernel;
    absl::Status status;  // a failed compile is remembered for its waiters only
    bool ready = false;
    double compile_ms = 0;
    int64_t hits = 0;
  };

  std::shared_ptr<JitEngine> jit_;
  mutable absl::Mutex mutex_;
  // Several entries may share a key (a hash collision): matched by identity.
  std::multimap<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mutex_);
  int64_t hits_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  double compile_ms_saved_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_KERNEL_CACHE_H_
