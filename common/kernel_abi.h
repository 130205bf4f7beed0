// The contract between generated kernels and the process that runs them, in
// one place (as XLA's cpu_runtime.h and TVM's c_backend_api.h name theirs):
// codegen emits calls by these names and signatures, the JIT defines them for
// every kernel it links, and the runtime implements them. Changing anything
// here changes the machine code of every kernel: bump Kiln's version
// (common/version.h), which every cache key holds, with it.
//
// A kernel:
//   extern "C" void <name>(void** args);
// args[i] is the data pointer of buffer i of its LoopFunction for i <
// num_params (inputs first, then outputs). Temporaries come from
// kiln_workspace_alloc on entry and go back through kiln_workspace_free on
// return; buffers marked `local` live on the stack of each thread.
// A parallel loop is outlined into a body function and run through
// kiln_parallel_for, which calls body(closure, begin, end) over disjoint
// ranges covering [0, extent) and returns when all have run.
#ifndef KILN_COMMON_KERNEL_ABI_H_
#define KILN_COMMON_KERNEL_ABI_H_

#include <cstdint>

namespace kiln::abi {

using KernelFn = void (*)(void** args);
using ParallelBody = void (*)(void* closure, int64_t begin, int64_t end);

inline constexpr char kParallelFor[] = "kiln_parallel_for";
inline constexpr char kWorkspaceAlloc[] = "kiln_workspace_alloc";
inline constexpr char kWorkspaceFree[] = "kiln_workspace_free";

// kiln_workspace_alloc's blocks are aligned to this many bytes, and codegen
// tells LLVM so.
inline constexpr int kWorkspaceAlignment = 64;

}  // namespace kiln::abi

// Defined by the runtime (thread_pool.cc, workspace_pool.cc).
extern "C" {
void kiln_parallel_for(kiln::abi::ParallelBody body, void* closure, int64_t extent);
void* kiln_workspace_alloc(int64_t bytes);
void kiln_workspace_free(void* block);
}

#endif  // KILN_COMMON_KERNEL_ABI_H_
