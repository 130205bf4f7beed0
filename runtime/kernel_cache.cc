// The kernel cache.
//
// Key: the fused group's stable structural hash (KernelSpec::structural_hash,
// over its canonical form: ops, typed attributes, types, topology and baked
// constants — never names) mixed with everything else that changes machine
// code: target triple, CPU, CPU features and codegen options. A key match is
// not proof: the entry's identity (canonical form + target + options) must be
// equal too, so a hash collision is a miss that is stored beside the other.
//
// Single flight: the first caller for an identity inserts a not-ready entry and
// compiles outside the lock; later callers find the entry and wait on the
// mutex's condition until it is ready. A failed compile wakes the waiters with
// its error and is then forgotten, so a later request tries again.
#include "runtime/kernel_cache.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln::runtime {
namespace {

std::string TargetString(const codegen::CodegenOptions& options) {
  const codegen::HostTarget& host = codegen::GetHostTarget();
  return absl::StrCat(host.triple, "|", host.cpu, "|", absl::StrJoin(host.features, ","), "|",
                      options.ToString(), "|llvm", codegen::LlvmVersionString());
}

uint64_t Mix(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string KernelCache::KeyHex(const KernelSpec& spec, const codegen::CodegenOptions& options) {
  return absl::StrFormat("%016x", Mix(spec.structural_hash, TargetString(options)));
}

absl::StatusOr<CacheLookup> KernelCache::GetOrCompile(const KernelSpec& spec,
                                                      const codegen::CodegenOptions& options) {
  const std::string key = KeyHex(spec, options);
  const std::string identity = absl::StrCat(spec.canonical, "#", TargetString(options));
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mutex_);
    auto range = entries_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second->identity == identity) entry = it->second;
    }
    if (entry != nullptr) {
      mutex_.Await(absl::Condition(
          +[](Entry* e) { return e->ready; }, entry.get()));
      if (!entry->status.ok()) return entry->status;
      ++entry->hits;
      ++hits_;
      compile_ms_saved_ += entry->compile_ms;
      return CacheLookup{entry->kernel, true, entry->compile_ms, key};
    }
    entry = std::make_shared<Entry>();
    entry->identity = identity;
    entry->ops = spec.ops;
    entries_.emplace(key, entry);
    ++misses_;
  }

  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<LoadedKernel>> kernel = [&]()
      -> absl::StatusOr<std::shared_ptr<LoadedKernel>> {
    absl::StatusOr<std::string> object = codegen::CompileToObject(spec.function, options);
    if (!object.ok()) return object.status();
    return jit_->Load(*object, spec.function.name);
  }();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  absl::MutexLock lock(&mutex_);
  entry->ready = true;
  entry->compile_ms = ms;
  if (!kernel.ok()) {
    entry->status = kernel.status();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second == entry) {
        entries_.erase(it);
        break;
      }
    }
    return kernel.status();
  }
  entry->kernel = *kernel;
  return CacheLookup{entry->kernel, false, ms, key};
}

CacheStats KernelCache::Stats() const {
  absl::MutexLock lock(&mutex_);
  CacheStats stats;
  stats.hits = hits_;
  stats.misses = misses_;
  stats.compile_ms_saved = compile_ms_saved_;
  for (const auto& [key, entry] : entries_) {
    if (!entry->ready) continue;
    ++stats.entries;
    stats.compile_ms_total += entry->compile_ms;
    stats.per_entry.push_back({key, entry->ops, entry->hits, entry->compile_ms});
  }
  return stats;
}

}  // namespace kiln::runtime
