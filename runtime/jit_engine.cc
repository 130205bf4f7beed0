// ORC LLJIT set-up. Each kernel lives in a JITDylib of its own that links
// against the main one, which resolves the process's symbols (libc, libm,
// libmvec) and defines the runtime's entry points (common/kernel_abi.h).
// Removing the JITDylib frees the code.
#include "runtime/jit_engine.h"

#include <cstdlib>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "runtime/kernel_fault.h"
#include "runtime/thread_pool.h"
#include "runtime/workspace_pool.h"

namespace kiln::runtime {
namespace {

absl::Status FromLlvmError(llvm::Error err, absl::string_view what) {
  std::string message = llvm::toString(std::move(err));
  return absl::InternalError(absl::StrCat(what, ": ", message));
}

}  // namespace

struct JitEngine::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitEngine::JitEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

JitEngine::~JitEngine() = default;

absl::StatusOr<std::shared_ptr<JitEngine>> JitEngine::Create() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return FromLlvmError(jit.takeError(), "creating the JIT");
  llvm::orc::JITDylib& main = (*jit)->getMainJITDylib();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) return FromLlvmError(process.takeError(), "resolving process symbols");
  main.addGenerator(std::move(*process));
  // KILN_PERF_JIT=1: kernels are announced to `perf` (record with -k 1, then
  // `perf inject --jit`), so profiles name generated code. Off by default:
  // the listener writes a dump file per process.
  if (const char* perf = std::getenv("KILN_PERF_JIT"); perf != nullptr && perf[0] == '1') {
    auto* layer = dynamic_cast<llvm::orc::RTDyldObjectLinkingLayer*>(&(*jit)->getObjLinkingLayer());
    llvm::JITEventListener* listener = llvm::JITEventListener::createPerfJITEventListener();
    if (layer != nullptr && listener != nullptr) layer->registerJITEventListener(*listener);
  }
  llvm::orc::SymbolMap runtime_symbols;
  auto define = [&](const char* name, auto* function) {
    runtime_symbols[(*jit)->mangleAndIntern(name)] = llvm::JITEvaluatedSymbol(
        llvm::pointerToJITTargetAddress(function), llvm::JITSymbolFlags::Exported);
  };
  define(abi::kParallelFor, &kiln_parallel_for);
  define(abi::kWorkspaceAlloc, &kiln_workspace_alloc);
  define(abi::kWorkspaceFree, &kiln_workspace_free);
  define(abi::kKernelFault, &kiln_kernel_fault);
  define(abi::kPadPlanes, &kiln_pad_planes);
  define(abi::kQConvU8S8, &kiln_qconv_u8s8);
  define(abi::kQConvU8S8Q8, &kiln_qconv_u8s8_q8);
  define(abi::kAttentionF32, &kiln_attention_f32);
  define(abi::kQMatMulU8S8, &kiln_qmatmul_u8s8);
  define(abi::kQMatMulU8S8I32, &kiln_qmatmul_u8s8_i32);
  define(abi::kQMatMulU8S8Q8, &kiln_qmatmul_u8s8_q8);
  if (llvm::Error err = main.define(llvm::orc::absoluteSymbols(std::move(runtime_symbols)))) {
    return FromLlvmError(std::move(err), "defining runtime symbols");
  }
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  return std::shared_ptr<JitEngine>(new JitEngine(std::move(impl)));
}

absl::StatusOr<std::shared_ptr<LoadedKernel>> JitEngine::Load(const std::string& object_bytes,
                                                              const std::string& symbol) {
  absl::MutexLock lock(&mutex_);
  llvm::orc::LLJIT& jit = *impl_->jit;
  auto dylib = jit.createJITDylib(absl::StrCat("kernel", next_dylib_++));
  if (!dylib) return FromLlvmError(dylib.takeError(), "creating a JITDylib");
  llvm::orc::JITDylib& jd = *dylib;
  jd.addToLinkOrder(jit.getMainJITDylib());
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object_bytes, symbol);
  if (llvm::Error err = jit.addObjectFile(jd, std::move(buffer))) {
    (void)jit.getExecutionSession().removeJITDylib(jd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot link kernel object: ", llvm::toString(std::move(err))));
  }
  auto address = jit.lookup(jd, symbol);
  if (!address) {
    std::string message = llvm::toString(address.takeError());
    (void)jit.getExecutionSession().removeJITDylib(jd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load kernel '", symbol, "': ", message));
  }
  auto fn = address->toPtr<KernelFn>();
  return std::shared_ptr<LoadedKernel>(new LoadedKernel(shared_from_this(), &jd, fn, symbol,
                                                        static_cast<int64_t>(object_bytes.size())));
}

void JitEngine::Remove(void* dylib) {
  absl::MutexLock lock(&mutex_);
  auto* jd = static_cast<llvm::orc::JITDylib*>(dylib);
  if (llvm::Error err = impl_->jit->getExecutionSession().removeJITDylib(*jd)) {
    llvm::consumeError(std::move(err));  // nothing useful to do while unloading
  }
}

LoadedKernel::~LoadedKernel() { engine_->Remove(dylib_); }

}  // namespace kiln::runtime
