// A hand-built loop nest compiled and loaded into a JIT, for runtime tests
// that need a kernel no graph would lower to (an unchecked index, one long
// loop, a refused temporary), and the fixture and readers they share.
#ifndef KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_
#define KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "gtest/gtest.h"
#include "runtime/jit_engine.h"
#include "runtime/tensor.h"

namespace kiln::runtime {

// Reports failures through gtest and returns null.
inline std::shared_ptr<LoadedKernel> LoadLoopKernel(JitEngine& jit, const lower::LoopFunction& fn,
                                                    const codegen::CodegenOptions& options = {}) {
  absl::StatusOr<std::string> object = codegen::CompileToObject(fn, options);
  EXPECT_TRUE(object.ok()) << object.status();
  if (!object.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<LoadedKernel>> kernel = jit.Load(*object, fn.name);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : nullptr;
}

// A float32 tensor's elements, copied out.
inline std::vector<float> FloatsOf(const Tensor& t) {
  std::vector<float> v(t.byte_size() / 4);
  std::memcpy(v.data(), t.data(), t.byte_size());
  return v;
}

// A JIT engine of its own for each test.
class JitEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jit = JitEngine::Create();
    ASSERT_TRUE(jit.ok()) << jit.status();
    jit_ = *jit;
  }
  std::shared_ptr<JitEngine> jit_;
};

}  // namespace kiln::runtime

#endif  // KILN_TESTS_RUNTIME_LOAD_LOOP_KERNEL_H_
