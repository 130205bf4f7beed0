// The kernel cache.
//
// Lookup order: memory, then disk, then the remote tier (Redis, shared by the
// replicas; remote_cache.cc), then compile. A remote hit is also written to
// disk; a compile is written to disk and, in the background, to Redis. Keys are SHA-256 digests of
// every input to code generation (cache_key.cc states the contract); a key
// match is confirmed by comparing the components themselves, so a collision
// is a miss. The memory map holds one entry per key; a colliding identity is
// compiled and served but not stored (SHA-256 collisions are not expected).
//
// Single flight: the first caller for a key inserts a not-ready entry and does
// the work outside the lock; later callers wait on the mutex until the entry
// is ready. The worker always finishes — LLVM cannot be interrupted — so a
// waiter that gives up (deadline) just stops waiting, and when the last waiter
// has left the result is still cached for the next request. A failed compile
// wakes its waiters with the error and is then forgotten.
//
// Memory entries have a byte budget (--cache-memory-max-bytes): past it the
// least recently used kernels that no loaded model holds are dropped (models
// hold shared_ptrs to the kernels they use, so nothing in use is unloaded;
// their code counts against --max-loaded-mb instead, memory_budget.h). The
// disk cache has a byte budget with LRU eviction of its own.
#include "engine/kernel_cache.h"

#include <chrono>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/ms_since.h"
#include "runtime/host_peaks.h"

namespace kiln::engine {
namespace {

int64_t NowUnixSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace

const char* CacheSourceName(CacheSource source) {
  switch (source) {
    case CacheSource::kMemory:
      return "memory hit";
    case CacheSource::kDisk:
      return "disk hit";
    case CacheSource::kRemote:
      return "remote hit";
    case CacheSource::kCompiled:
      return "compiled";
  }
  return "?";
}

KernelCache::KernelCache(std::shared_ptr<runtime::JitEngine> jit, KernelCacheOptions options)
    : jit_(std::move(jit)), options_(std::move(options)) {
  if (!options_.dir.empty()) disk_ = DiskCache::Open(options_.dir, options_.max_bytes);
  if (!options_.remote.url.empty()) {
    absl::StatusOr<std::unique_ptr<RemoteCache>> remote = RemoteCache::Create(options_.remote);
    if (remote.ok()) {
      remote_ = *std::move(remote);
    } else {
      Log(LogLevel::kWarning, "kernel_cache",
          absl::StrCat("no remote kernel cache: ", remote.status().message()));
    }
  }
  if (options_.cpu_model.empty()) options_.cpu_model = runtime::CpuModelName();
  // Records are kept in the cache's directory where the disk cache could
  // open it, unless they have a directory of their own.
  std::string tuning_dir = options_.tuning_dir;
  if (tuning_dir.empty() && disk_) tuning_dir = options_.dir;
  tuning_ = std::make_unique<TuningRecords>(
      tuning_dir,
      TuningCpu{options_.target.cpu, options_.cpu_model, options_.target.features});
}

std::string KernelCache::NearestMissReason(const KernelKey& key) const {
  const std::vector<std::string> ops = CanonicalOps(key.canonical);
  const KernelKey* same_ops = nullptr;
  for (const auto& [hex, entry] : entries_) {
    if (!entry->ready || hex == key.hex) continue;
    if (entry->key.canonical == key.canonical) return ExplainDifference(key, entry->key);
    if (same_ops == nullptr && CanonicalOps(entry->key.canonical) == ops) same_ops = &entry->key;
  }
  return same_ops ? ExplainDifference(key, *same_ops) : "";
}

absl::StatusOr<CacheLookup> KernelCache::GetOrCompile(const KernelSpec& spec,
                                                      const codegen::CodegenOptions& options,
                                                      absl::Time deadline) {
  const KernelKey key = MakeKernelKey(spec, options_.target, options);
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(key.hex);
    if (it != entries_.end() && it->second->key.SameIdentity(key)) {
      entry = it->second;
      auto ready = [](Entry* e) { return e->ready; };
      if (!mutex_.AwaitWithDeadline(absl::Condition(+ready, entry.get()), deadline)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "gave up waiting for kernel ", key.hex.substr(0, 16),
            " to compile; the compile goes on and will be cached"));
      }
      if (!entry->status.ok()) return entry->status;
      entry->last_use = ++clock_;
      ++entry->info.hits;
      entry->info.last_use_unix_s = NowUnixSeconds();
      ++memory_hits_;
      compile_ms_saved_ += entry->info.compile_ms;
      CacheLookup hit;
      hit.kernel = entry->kernel;
      hit.source = CacheSource::kMemory;
      hit.compile_ms = entry->info.compile_ms;
      hit.key_hex = key.hex;
      return hit;
    }
    if (it == entries_.end()) {
      entry = std::make_shared<Entry>();
      entry->key = key;
      entries_[key.hex] = entry;
    }
    ++misses_;
  }

  absl::StatusOr<CacheLookup> result = LoadOrCompile(spec, key, options, deadline);
  if (entry == nullptr) return result;  // a colliding identity: served, not stored

  absl::MutexLock lock(&mutex_);
  entry->ready = true;
  if (!result.ok()) {
    entry->status = result.status();
    entries_.erase(key.hex);
    return result;
  }
  entry->kernel = result->kernel;
  KernelInfo& info = entry->info;
  info.key_hex = key.hex;
  info.symbol = spec.function.name;
  info.ops = spec.ops;
  info.arg_types = spec.arg_types;
  info.flops = spec.flops;
  info.bytes = spec.bytes;
  info.triple = key.target.triple;
  info.cpu = key.target.cpu;
  info.options = key.options;
  info.compile_ms = result->compile_ms;
  info.object_bytes = result->object_bytes;
  info.last_use_unix_s = NowUnixSeconds();
  info.origin = result->source;
  info.tuned = spec.tuned;
  entry->last_use = ++clock_;
  if (result->source == CacheSource::kDisk || result->source == CacheSource::kRemote) {
    ++(result->source == CacheSource::kDisk ? disk_hits_ : remote_hits_);
    compile_ms_saved_ += result->compile_ms;
  } else {
    result->miss_reason = NearestMissReason(key);
  }
  EvictBeyondBudget();
  return result;
}

void KernelCache::Trim() {
  absl::MutexLock lock(&mutex_);
  EvictBeyondBudget();
}

void KernelCache::EvictBeyondBudget() {
  int64_t bytes = 0;
  for (const auto& [hex, entry] : entries_) {
    if (entry->ready) bytes += entry->info.object_bytes;
  }
  while (bytes > options_.memory_max_bytes) {
    // The oldest entry only the cache holds (a model running it keeps it).
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = *it->second;
      if (!e.ready || !e.kernel || e.kernel.use_count() > 1) continue;
      if (victim == entries_.end() || e.last_use < victim->second->last_use) victim = it;
    }
    if (victim == entries_.end()) return;  // everything left is in use
    bytes -= victim->second->info.object_bytes;
    entries_.erase(victim);
    ++memory_evictions_;
  }
}

std::optional<CacheLookup> KernelCache::LinkStored(const DiskEntry& stored, CacheSource source,
                                                   std::chrono::steady_clock::time_point start) {
  auto kernel = jit_->Load(stored.object, stored.symbol);
  if (!kernel.ok()) return std::nullopt;  // a verified entry the JIT refuses: compile afresh
  CacheLookup out;
  out.key_hex = stored.key.hex;
  out.kernel = *kernel;
  out.source = source;
  out.compile_ms = stored.compile_ms;
  out.load_ms = MsSince(start);
  out.object_bytes = static_cast<int64_t>(stored.object.size());
  return out;
}

absl::StatusOr<CacheLookup> KernelCache::LoadOrCompile(const KernelSpec& spec, const KernelKey& key,
                                                       const codegen::CodegenOptions& options,
                                                       absl::Time deadline) {
  if (disk_) {
    const auto start = std::chrono::steady_clock::now();
    std::optional<DiskEntry> stored = disk_->Load(key);
    if (stored) {
      std::optional<CacheLookup> linked = LinkStored(*stored, CacheSource::kDisk, start);
      if (linked) return *std::move(linked);
    }
  }
  // Held while this process compiles for the cluster; released after the write.
  std::unique_ptr<RemoteLease> lease;
  if (remote_) {
    const auto start = std::chrono::steady_clock::now();
    std::optional<DiskEntry> stored = remote_->LoadOrLease(key, deadline, &lease);
    if (stored) {
      std::optional<CacheLookup> linked = LinkStored(*stored, CacheSource::kRemote, start);
      if (linked) {
        if (disk_) disk_->Store(*stored);  // the next start needs no Redis
        return *std::move(linked);
      }
    }
  }
  CacheLookup out;
  out.key_hex = key.hex;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> object = codegen::CompileToObject(spec.function, options);
  if (!object.ok()) return object.status();
  auto kernel = jit_->Load(*object, spec.function.name);
  if (!kernel.ok()) return kernel.status();
  out.kernel = *kernel;
  out.source = CacheSource::kCompiled;
  out.compile_ms = MsSince(start);
  out.object_bytes = static_cast<int64_t>(object->size());
  {
    absl::MutexLock lock(&mutex_);
    ++compiles_;
    compile_ms_total_ += out.compile_ms;
  }
  if ((disk_ || remote_) && out.compile_ms >= options_.min_compile_ms) {
    DiskEntry stored;
    stored.key = key;
    stored.symbol = spec.function.name;
    stored.ops = spec.ops;
    stored.compile_ms = out.compile_ms;
    stored.created_unix_s = NowUnixSeconds();
    stored.object = *std::move(object);
    if (disk_) disk_->Store(stored);
    if (remote_) remote_->Store(std::move(stored), std::move(lease));
  }
  return out;
}

CacheStats KernelCache::Stats() const {
  CacheStats stats;
  if (disk_) stats.disk = disk_->Stats();
  if (remote_) stats.remote = remote_->Stats();
  absl::MutexLock lock(&mutex_);
  stats.memory_hits = memory_hits_;
  stats.memory_evictions = memory_evictions_;
  stats.disk_hits = disk_hits_;
  stats.remote_hits = remote_hits_;
  stats.misses = misses_;
  stats.compiles = compiles_;
  stats.compile_ms_total = compile_ms_total_;
  stats.compile_ms_saved = compile_ms_saved_;
  for (const auto& [hex, entry] : entries_) {
    if (!entry->ready) continue;
    ++stats.memory_entries;
    stats.memory_bytes += entry->info.object_bytes;
    stats.entries.push_back(entry->info);
    if (!entry->info.tuned.empty()) {
      std::optional<TuningRecord> record =
          tuning_->Find(TuningStructureKey(entry->key.canonical));
      if (record) stats.entries.back().tuned_gain = record->Gain();
    }
  }
  for (const TuningRecord& r : tuning_->All()) {
    ++stats.tuning_records_total;
    if (r.cpu == tuning_->host()) ++stats.tuning_records_here;
  }
  stats.tuning_uses = tuning_->uses();
  return stats;
}

absl::StatusOr<std::pair<std::shared_ptr<runtime::LoadedKernel>, KernelInfo>> KernelCache::Find(
    const std::string& key_hex) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key_hex);
  if (it == entries_.end() && key_hex.size() >= 8) {
    // A unique prefix will do (the CLI shows 16 digits).
    auto first = entries_.lower_bound(key_hex);
    if (first != entries_.end() && first->first.compare(0, key_hex.size(), key_hex) == 0) {
      auto second = std::next(first);
      if (second == entries_.end() || second->first.compare(0, key_hex.size(), key_hex) != 0) {
        it = first;
      }
    }
  }
  if (it == entries_.end() || !it->second->ready || !it->second->kernel) {
    return absl::NotFoundError(absl::StrCat("no loaded kernel with key '", key_hex,
                                            "'; ListKernels shows them"));
  }
  it->second->info.last_use_unix_s = NowUnixSeconds();
  return std::make_pair(it->second->kernel, it->second->info);
}

}  // namespace kiln::engine
