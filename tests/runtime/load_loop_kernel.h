// A hand-built loop nest compiled and loaded into a JIT, for runtime tests
// that need a kernel no graph would lower to (an unchecked index, one long
// loop). Reports failures through gtest and returns null.
#ifndef KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_
#define KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_

#include <memory>
#include <string>

#include "compiler/codegen/codegen.h"
#include "gtest/gtest.h"
#include "runtime/jit_engine.h"

namespace kiln::runtime {

inline std::shared_ptr<LoadedKernel> LoadLoopKernel(JitEngine& jit, const lower::LoopFunction& fn,
                                                    const codegen::CodegenOptions& options = {}) {
  absl::StatusOr<std::string> object = codegen::CompileToObject(fn, options);
  EXPECT_TRUE(object.ok()) << object.status();
  if (!object.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<LoadedKernel>> kernel = jit.Load(*object, fn.name);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : nullptr;
}

}  // namespace kiln::runtime

#endif  // KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_
