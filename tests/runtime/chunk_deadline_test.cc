// A call's deadline reaches into a long kernel: CompiledModel::Run checks it
// between kernels, and the kernel pool before each chunk of a parallel loop,
// so a one-kernel model whose kernel is one long parallel loop stops at a
// chunk boundary with DeadlineExceeded naming the kernel (before, only the
// gaps between kernels were checked, and a call's last kernel ran to its
// end whatever its deadline). The kernel: out[p] = sum over 2^24 terms of
// in[0] for p in [0, 64), a parallel loop of slow iterations.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "compiler/codegen/codegen.h"
#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/jit_engine.h"
#include "tests/runtime/load_loop_kernel.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kOutputs = 64;
constexpr int64_t kSide = 4096;  // kSide^2 = 2^24 terms per output

const TensorType kInType{DType::kFloat32, {1}};
const TensorType kOutType{DType::kFloat32, {kOutputs}};

std::shared_ptr<LoadedKernel> SlowSumKernel(JitEngine& jit) {
  te::ExprBuilder b;
  lower::LoopFunction fn;
  fn.name = "slow_sum";
  fn.buffers = {{"in", te::ScalarType::kF32, 1}, {"out", te::ScalarType::kF32, kOutputs}};
  fn.num_params = 2;
  te::Var p = b.NewVar("p", kOutputs);
  te::Var r1 = b.NewVar("r1", kSide), r2 = b.NewVar("r2", kSide);
  te::Expr sum =
      b.Reduce(te::ReduceOp::kSum, {r1, r2}, b.Load(0, te::ScalarType::kF32, {b.Int(0)}));
  fn.body = lower::MakeFor(p, lower::ForKind::kParallel, lower::MakeStore(1, b.Ref(p), sum));
  return LoadLoopKernel(jit, fn);
}

Program SlowSumProgram() {
  Program p;
  p.name = "slow";
  p.values = {{ValueSpec::Kind::kInput, "in", kInType, nullptr},
              {ValueSpec::Kind::kIntermediate, "out", kOutType, nullptr}};
  p.inputs = {0};
  p.outputs = {1};
  p.output_names = {"out"};
  p.kernels = {{"slow_sum_0", {0, 1}}};
  return p;
}

TEST(ChunkDeadlineTest, ALongKernelStopsAtAChunkOnceTheCallsDeadlinePassed) {
  SetParallelThreads(2);
  absl::StatusOr<std::shared_ptr<JitEngine>> jit = JitEngine::Create();
  ASSERT_TRUE(jit.ok()) << jit.status();
  std::shared_ptr<LoadedKernel> kernel = SlowSumKernel(**jit);
  ASSERT_NE(kernel, nullptr);
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      CompiledModel::Create(SlowSumProgram(), {kernel});
  ASSERT_TRUE(model.ok()) << model.status();
  // 2^-10 per term: every partial sum of 2^24 of them is exact in float.
  const float term = 1.0f / 1024;
  absl::StatusOr<Tensor> in =
      Tensor::FromBytes(kInType, absl::string_view(reinterpret_cast<const char*>(&term), 4));
  ASSERT_TRUE(in.ok());

  // A deadline a microsecond away has passed by the first chunk.
  absl::StatusOr<RunResult> late = (*model)->Run({&*in}, absl::Now() + absl::Microseconds(1));
  ASSERT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("inside kernel 1 of 1 (slow_sum_0)"));

  // Without a deadline, and with a distant one, the same model runs whole.
  for (absl::Time deadline : {absl::InfiniteFuture(), absl::Now() + absl::Minutes(5)}) {
    absl::StatusOr<RunResult> whole = (*model)->Run({&*in}, deadline);
    ASSERT_TRUE(whole.ok()) << whole.status();
    std::vector<float> out(kOutputs);
    std::memcpy(out.data(), whole->outputs[0].data(), 4 * kOutputs);
    for (float v : out) EXPECT_EQ(v, 16384.0f);  // 2^24 * 2^-10
  }
}

}  // namespace
}  // namespace kiln::runtime
