// A fixture for lowering tests that compile and run graphs: a fresh
// ModelManager for each test, and the kernel pool's thread count put back
// as the test found it (tests that run at 1 and 2 threads set it).
#ifndef KILN_TESTS_TEST_UTIL_MODEL_MANAGER_TEST_H_
#define KILN_TESTS_TEST_UTIL_MODEL_MANAGER_TEST_H_

#include <memory>

#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "runtime/thread_pool.h"

namespace kiln::testing {

// `Base`: ::testing::Test, or ::testing::TestWithParam<P> for value-
// parameterised tests.
template <typename Base = ::testing::Test>
class ModelManagerTest : public Base {
 protected:
  void SetUp() override {
    threads_before_ = runtime::GetParallelThreads();
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void TearDown() override { runtime::SetParallelThreads(threads_before_); }

  std::unique_ptr<engine::ModelManager> manager_;

 private:
  int threads_before_ = 1;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_MODEL_MANAGER_TEST_H_
