// The JIT: links object code from codegen into this process and hands out
// callable kernels. The only Kiln code that includes ORC headers (in the .cc).
#ifndef KILN_RUNTIME_JIT_ENGINE_H_
#define KILN_RUNTIME_JIT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/kernel_abi.h"

namespace kiln::runtime {

using KernelFn = abi::KernelFn;

class JitEngine;

// A linked kernel. Its code stays mapped while this object lives; destroying it
// removes the code. Holds its engine alive.
class LoadedKernel {
 public:
  ~LoadedKernel();
  KernelFn fn() const { return fn_; }
  // The symbol it was loaded as: the name of the kernel first compiled with
  // this code (the cache shares one kernel between equal groups).
  const std::string& symbol() const { return symbol_; }
  // Size of the object it was linked from: about what the JIT mapped for it.
  int64_t object_bytes() const { return object_bytes_; }

 private:
  friend class JitEngine;
  LoadedKernel(std::shared_ptr<JitEngine> engine, void* dylib, KernelFn fn, std::string symbol,
               int64_t object_bytes)
      : engine_(std::move(engine)),
        dylib_(dylib),
        fn_(fn),
        symbol_(std::move(symbol)),
        object_bytes_(object_bytes) {}
  std::shared_ptr<JitEngine> engine_;
  void* dylib_;  // llvm::orc::JITDylib*
  KernelFn fn_;
  std::string symbol_;
  int64_t object_bytes_;
};

class JitEngine : public std::enable_shared_from_this<JitEngine> {
 public:
  // One LLJIT resolving libc/libm from the process and the runtime's entry
  // points (common/kernel_abi.h).
  static absl::StatusOr<std::shared_ptr<JitEngine>> Create();
  ~JitEngine();

  // Links `object_bytes` (a relocatable object) into a fresh JITDylib, so equal
  // symbol names in different kernels never clash, and resolves `symbol` now.
  absl::StatusOr<std::shared_ptr<LoadedKernel>> Load(const std::string& object_bytes,
                                                     const std::string& symbol);

 private:
  friend class LoadedKernel;
  struct Impl;
  explicit JitEngine(std::unique_ptr<Impl> impl);
  void Remove(void* dylib);

  absl::Mutex mutex_;
  std::unique_ptr<Impl> impl_;
  int64_t next_dylib_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_JIT_ENGINE_H_
