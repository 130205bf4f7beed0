// Compiled kernels by key, in memory and on disk, so a group compiled once — in
// this model, another model, or an earlier run of the server — is not compiled
// again. See kernel_cache.cc for the design and cache_key.cc for the key.
#ifndef KILN_ENGINE_KERNEL_CACHE_H_
#define KILN_ENGINE_KERNEL_CACHE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compiler/codegen/codegen.h"
#include "compiler/lower/lowered_program.h"
#include "engine/cache_key.h"
#include "engine/disk_cache.h"
#include "engine/remote_cache.h"
#include "engine/tuning_records.h"
#include "runtime/jit_engine.h"

namespace kiln::engine {

enum class CacheSource { kMemory, kDisk, kRemote, kCompiled };
// "memory hit", "disk hit", "remote hit", "compiled"
const char* CacheSourceName(CacheSource source);

struct CacheLookup {
  std::shared_ptr<runtime::LoadedKernel> kernel;
  CacheSource source = CacheSource::kCompiled;
  double compile_ms = 0;  // the original compile (on a hit: what the hit saved)
  double load_ms = 0;     // reading and linking a disk or remote entry
  int64_t object_bytes = 0;
  std::string key_hex;
  // On a miss with a near neighbour in the cache: how the keys differ.
  std::string miss_reason;
  bool hit() const { return source != CacheSource::kCompiled; }
};

struct KernelCacheOptions {
  std::string dir;             // empty: memory only (--cache-dir)
  int64_t max_bytes = 1 << 30;  // disk budget (--cache-max-bytes)
  double min_compile_ms = 0;   // only kernels slower to compile go to disk (--cache-min-compile-ms)
  // Object bytes kept in memory: beyond it, the least recently used kernels
  // no loaded model holds are dropped (--cache-memory-max-bytes).
  int64_t memory_max_bytes = int64_t{256} << 20;
  TargetDescription target = TargetDescription::Host();
  // The shared tier after the disk (--remote-cache); empty url: none.
  RemoteCacheOptions remote;
  // /proc/cpuinfo's model name: with target's CPU and features, the CPU
  // tuning records are kept for.
  std::string cpu_model;
  // Where tuning records are read and written; empty: `dir` (when the disk
  // cache opened it), else memory only.
  std::string tuning_dir;
};

// One cached kernel as the queries and remote calls see it.
struct KernelInfo {
  std::string key_hex;
  std::string symbol;
  std::vector<std::string> ops;
  std::vector<TensorType> arg_types;  // inputs, then the output
  // One call's FLOPs and argument bytes, for BenchmarkKernel's roofline.
  double flops = 0;
  int64_t bytes = 0;
  std::string triple, cpu, options;
  double compile_ms = 0;
  int64_t object_bytes = 0;
  int64_t hits = 0;
  int64_t last_use_unix_s = 0;
  CacheSource origin = CacheSource::kCompiled;
  // The tuning record's schedule the kernel follows ("" when untuned), and
  // how many times faster than the estimate's it measured.
  std::string tuned;
  double tuned_gain = 0;
};

struct CacheStats {
  int64_t memory_entries = 0;
  int64_t memory_bytes = 0;
  int64_t memory_evictions = 0;
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t remote_hits = 0;  // kernels this process took from the remote tier
  int64_t misses = 0;
  int64_t compiles = 0;
  double compile_ms_total = 0;  // spent compiling in this process
  double compile_ms_saved = 0;  // original compile time of every hit
  DiskCacheStats disk;
  RemoteCacheStats remote;
  std::vector<KernelInfo> entries;
  // Tuning records: for this CPU and in all, and schedules they gave compiles.
  int64_t tuning_records_here = 0;
  int64_t tuning_records_total = 0;
  int64_t tuning_uses = 0;
};

class KernelCache {
 public:
  // With options.remote.url set, a remote tier; a URL that does not parse
  // (callers check it first with ParseRedisUrl) leaves it off with a warning.
  // Redis itself need not be up.
  KernelCache(std::shared_ptr<runtime::JitEngine> jit, KernelCacheOptions options);

  // The kernel for `spec`: from memory, from disk, from the remote tier, or
  // compiled — once, however many callers ask at the same time (and with a
  // remote tier, once in the cluster when no replica waits past `deadline`).
  // A waiter whose `deadline` passes gets DeadlineExceeded; the compile it
  // waited on goes on and is cached.
  absl::StatusOr<CacheLookup> GetOrCompile(const KernelSpec& spec,
                                           const codegen::CodegenOptions& options,
                                           absl::Time deadline = absl::InfiniteFuture());
  CacheStats Stats() const;
  // Applies the memory budget now (after a model is unloaded, its kernels
  // become droppable).
  void Trim();
  // A loaded kernel by key or unique key prefix of 8+ digits (NotFound
  // otherwise), for remote calls.
  absl::StatusOr<std::pair<std::shared_ptr<runtime::LoadedKernel>, KernelInfo>> Find(
      const std::string& key_hex);
  // The measured schedules kept with the cache (in its directory, if any).
  TuningRecords& tuning() { return *tuning_; }
  const TargetDescription& target() const { return options_.target; }
  const std::shared_ptr<runtime::JitEngine>& jit() const { return jit_; }

 private:
  struct Entry {
    KernelKey key;
    KernelInfo info;
    std::shared_ptr<runtime::LoadedKernel> kernel;
    absl::Status status;
    bool ready = false;
    uint64_t last_use = 0;  // clock_ at the last lookup
  };

  // Drops least recently used kernels that nothing outside the cache holds
  // until the kept object bytes fit memory_max_bytes.
  void EvictBeyondBudget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  absl::StatusOr<CacheLookup> LoadOrCompile(const KernelSpec& spec, const KernelKey& key,
                                            const codegen::CodegenOptions& options,
                                            absl::Time deadline);
  // A verified stored entry (disk or remote) linked, or nullopt if the JIT
  // refuses it.
  std::optional<CacheLookup> LinkStored(const DiskEntry& stored, CacheSource source,
                                        std::chrono::steady_clock::time_point start);
  std::string NearestMissReason(const KernelKey& key) const ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  std::shared_ptr<runtime::JitEngine> jit_;
  KernelCacheOptions options_;
  std::unique_ptr<DiskCache> disk_;
  std::unique_ptr<RemoteCache> remote_;
  std::unique_ptr<TuningRecords> tuning_;
  mutable absl::Mutex mutex_;
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mutex_);
  int64_t memory_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t clock_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t memory_evictions_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t disk_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t remote_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t compiles_ ABSL_GUARDED_BY(mutex_) = 0;
  double compile_ms_total_ ABSL_GUARDED_BY(mutex_) = 0;
  double compile_ms_saved_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_KERNEL_CACHE_H_
