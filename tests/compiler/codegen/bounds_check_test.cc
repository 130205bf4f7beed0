// Bounds-checked codegen (CodegenOptions::bounds_checks) on hand-built loop
// nests whose indices come from an input buffer at run time, as a gather's
// do: an index outside its buffer is reported and the kernel returns, its
// access not made; valid indices give the same values with checks and
// without, equal to plain C++ loops.
#include "compiler/codegen/codegen.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/kernel_abi.h"
#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/jit_engine.h"
#include "runtime/kernel_fault.h"

namespace kiln {
namespace {

using lower::ForKind;
using lower::LoopFunction;
using te::Expr;
using te::ScalarType;
using ::testing::HasSubstr;

constexpr float kSentinel = -12345;

class BoundsCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jit = runtime::JitEngine::Create();
    ASSERT_TRUE(jit.ok()) << jit.status();
    jit_ = *jit;
  }

  std::shared_ptr<runtime::LoadedKernel> Build(const LoopFunction& fn, bool checks) {
    codegen::CodegenOptions options;
    options.bounds_checks = checks;
    auto object = codegen::CompileToObject(fn, options);
    EXPECT_TRUE(object.ok()) << object.status();
    if (!object.ok()) return nullptr;
    auto kernel = jit_->Load(*object, fn.name);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? *kernel : nullptr;
  }

  // Runs `kernel` on `params` with a fresh fault slot after them, as the
  // runtime does; the status names the parameters as `fn` does.
  absl::Status Call(const runtime::LoadedKernel& kernel, const LoopFunction& fn,
                    std::vector<void*> params) {
    fault_ = std::make_unique<abi::KernelFault>();
    params.push_back(fault_.get());
    kernel.fn()(params.data());
    std::vector<std::string> names;
    for (int i = 0; i < fn.num_params; ++i) names.push_back(fn.buffers[i].name);
    return runtime::KernelFaultStatus(*fault_, fn.name, names);
  }

  // out[i] = table[idx[i]] for i < n, serially.
  LoopFunction SerialGather(int64_t table_size, int64_t n) {
    LoopFunction fn;
    fn.name = "gather_rows";
    fn.buffers = {{"table", ScalarType::kF32, table_size},
                  {"idx", ScalarType::kI64, n},
                  {"out", ScalarType::kF32, n}};
    fn.num_params = 3;
    te::Var i = b_.NewVar("i", n);
    Expr index = b_.Load(1, ScalarType::kI64, {b_.Ref(i)});
    fn.body = lower::MakeFor(i, ForKind::kSerial,
                             lower::MakeStore(2, b_.Ref(i), b_.Load(0, ScalarType::kF32, {index})));
    return fn;
  }

  // The same gather as a vector loop: blocks of 8 lanes, the last one
  // masked to i < n (its masked-off lanes' idx elements lie past idx).
  LoopFunction VectorGather(int64_t table_size, int64_t n) {
    LoopFunction fn;
    fn.name = "gather_lanes";
    fn.buffers = {{"table", ScalarType::kF32, table_size},
                  {"idx", ScalarType::kI64, n},
                  {"out", ScalarType::kF32, n}};
    fn.num_params = 3;
    te::Var xb = b_.NewVar("xb", (n + 7) / 8), v = b_.NewVar("v", 8);
    Expr x = b_.Add(b_.Mul(b_.Ref(xb), b_.Int(8)), b_.Ref(v));
    Expr index = b_.Load(1, ScalarType::kI64, {x});
    fn.body = lower::MakeFor(
        xb, ForKind::kSerial,
        lower::MakeFor(v, ForKind::kVector,
                       lower::MakeStore(2, x, b_.Load(0, ScalarType::kF32, {index}),
                                        b_.Compare(te::CompareOp::kLT, x, b_.Int(n)))));
    return fn;
  }

  te::ExprBuilder b_;
  std::shared_ptr<runtime::JitEngine> jit_;
  std::unique_ptr<abi::KernelFault> fault_;
};

std::vector<float> Table(int64_t n) {
  std::vector<float> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = 100.0f + 3.0f * i;
  return t;
}

TEST_F(BoundsCheckTest, RunTimeIndexPastTheEndIsReportedAndNotRead) {
  LoopFunction fn = SerialGather(10, 6);
  auto kernel = Build(fn, true);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> table = Table(10), out(6, kSentinel);
  std::vector<int64_t> idx = {1, 4, 10, 2, 3, 0};
  absl::Status s = Call(*kernel, fn, {table.data(), idx.data(), out.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'gather_rows'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("loaded from element 10 of 'table'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("which has 10 elements"));
  EXPECT_EQ(fault_->buffer, 0);
  EXPECT_EQ(fault_->index, 10);
  EXPECT_EQ(fault_->num_elements, 10);
  EXPECT_EQ(fault_->is_store, 0);
  // Elements before the fault were written; the kernel returned at it.
  EXPECT_EQ(out[0], table[1]);
  EXPECT_EQ(out[1], table[4]);
  for (int i = 2; i < 6; ++i) EXPECT_EQ(out[i], kSentinel) << i;
}

TEST_F(BoundsCheckTest, NegativeRunTimeIndexIsReported) {
  LoopFunction fn = SerialGather(10, 3);
  auto kernel = Build(fn, true);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> table = Table(10), out(3, kSentinel);
  std::vector<int64_t> idx = {0, -1, 2};
  absl::Status s = Call(*kernel, fn, {table.data(), idx.data(), out.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("element -1 of 'table'"));
  EXPECT_EQ(out[2], kSentinel);
}

TEST_F(BoundsCheckTest, ValidRunTimeIndicesMatchTheLoopWithAndWithoutChecks) {
  const int64_t table_size = 10, n = 13;
  std::vector<float> table = Table(table_size);
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = (i * 7 + 3) % table_size;
  idx[n - 1] = table_size - 1;  // the last element, and the first
  idx[0] = 0;
  for (bool vector : {false, true}) {
    for (bool checks : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (vector ? "vector" : "serial")
                                        << (checks ? ", checked" : ", unchecked"));
      LoopFunction fn = vector ? VectorGather(table_size, n) : SerialGather(table_size, n);
      auto kernel = Build(fn, checks);
      ASSERT_NE(kernel, nullptr);
      std::vector<float> out(n, kSentinel);
      ASSERT_TRUE(Call(*kernel, fn, {table.data(), idx.data(), out.data()}).ok());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 100.0f + 3.0f * idx[i]) << i;
    }
  }
}

// In a vector loop the failing lane's own index is reported, and the
// block's masked store is not made.
TEST_F(BoundsCheckTest, VectorGatherReportsTheFailingLanesIndex) {
  const int64_t table_size = 10, n = 13;
  LoopFunction fn = VectorGather(table_size, n);
  auto kernel = Build(fn, true);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> table = Table(table_size), out(n, kSentinel);
  std::vector<int64_t> idx(n, 1);
  idx[10] = 1000;  // block 1, lane 2
  absl::Status s = Call(*kernel, fn, {table.data(), idx.data(), out.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'gather_lanes'"));
  EXPECT_EQ(fault_->index, 1000);
  EXPECT_EQ(fault_->buffer, 0);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out[i], table[1]) << i;
  for (int64_t i = 8; i < n; ++i) EXPECT_EQ(out[i], kSentinel) << i;
}

// out[idx[i]] = x[i]: a store past `out` leaves the memory after it as it was.
TEST_F(BoundsCheckTest, StoreAtRunTimeIndexPastTheEndIsNotMade) {
  const int64_t n = 4, size = 7, guard = 16;
  LoopFunction fn;
  fn.name = "scatter";
  fn.buffers = {{"x", ScalarType::kF32, n}, {"idx", ScalarType::kI64, n},
                {"out", ScalarType::kF32, size}};
  fn.num_params = 3;
  te::Var i = b_.NewVar("i", n);
  fn.body = lower::MakeFor(i, ForKind::kSerial,
                           lower::MakeStore(2, b_.Load(1, ScalarType::kI64, {b_.Ref(i)}),
                                            b_.Load(0, ScalarType::kF32, {b_.Ref(i)})));
  auto kernel = Build(fn, true);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> x = {1, 2, 3, 4}, out(size + guard, kSentinel);
  std::vector<int64_t> idx = {3, 0, size + 2, 1};
  absl::Status s = Call(*kernel, fn, {x.data(), idx.data(), out.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("stored to element 9 of 'out' (parameter 2)"));
  EXPECT_EQ(fault_->is_store, 1);
  EXPECT_EQ(out[3], 1);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], kSentinel);  // after the fault
  for (int64_t g = size; g < size + guard; ++g) ASSERT_EQ(out[g], kSentinel) << g;
}

// A fault in one range of a parallel loop stops the kernel after the loop:
// the stage that follows never runs.
TEST_F(BoundsCheckTest, FaultInParallelLoopStopsTheKernel) {
  const int64_t n = 256, table_size = 10;
  LoopFunction fn;
  fn.name = "parallel_gather";
  fn.buffers = {{"table", ScalarType::kF32, table_size}, {"idx", ScalarType::kI64, n},
                {"out", ScalarType::kF32, n}, {"after", ScalarType::kF32, n}};
  fn.num_params = 4;
  te::Var i = b_.NewVar("i", n), j = b_.NewVar("j", n);
  Expr index = b_.Load(1, ScalarType::kI64, {b_.Ref(i)});
  fn.body = lower::MakeSeq(
      {lower::MakeFor(i, ForKind::kParallel,
                      lower::MakeStore(2, b_.Ref(i), b_.Load(0, ScalarType::kF32, {index}))),
       lower::MakeFor(j, ForKind::kSerial, lower::MakeStore(3, b_.Ref(j), b_.Float(1)))});
  auto kernel = Build(fn, true);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> table = Table(table_size), out(n, kSentinel), after(n, kSentinel);
  std::vector<int64_t> idx(n, 2);
  ASSERT_TRUE(Call(*kernel, fn, {table.data(), idx.data(), out.data(), after.data()}).ok());
  for (int64_t q = 0; q < n; ++q) ASSERT_EQ(after[q], 1) << q;

  std::fill(after.begin(), after.end(), kSentinel);
  idx[200] = -5;
  absl::Status s = Call(*kernel, fn, {table.data(), idx.data(), out.data(), after.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("element -5 of 'table'"));
  for (int64_t q = 0; q < n; ++q) ASSERT_EQ(after[q], kSentinel) << q;
}

TEST_F(BoundsCheckTest, OffByDefaultAndPartOfTheOptionsString) {
  codegen::CodegenOptions checked;
  checked.bounds_checks = true;
  EXPECT_FALSE(codegen::CodegenOptions{}.bounds_checks);
  EXPECT_EQ(codegen::CodegenOptions{}.ToString(), "O3");
  EXPECT_EQ(checked.ToString(), "O3 bounds-checked");

  LoopFunction fn = SerialGather(10, 6);
  auto plain = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  auto with_checks = codegen::EmitOptimizedIR(fn, checked);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(with_checks.ok()) << with_checks.status();
  EXPECT_THAT(*plain, ::testing::Not(HasSubstr(abi::kKernelFault)));
  EXPECT_THAT(*with_checks, HasSubstr(abi::kKernelFault));
}

}  // namespace
}  // namespace kiln
