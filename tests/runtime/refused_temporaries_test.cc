// A kernel whose temporaries the system refuses (kiln_workspace_alloc
// returns null) writes nothing and returns; its two callers, a model's run
// and a single kernel call, return ResourceExhausted naming the kernel and
// the bytes, give back the temporaries it did get, and serve the next call.
// The refused temporary asks for 1 PiB: more than a 47-bit address space
// holds, so no system grants it, whatever its overcommit policy.
#include <memory>
#include <string>
#include <vector>

#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/jit_engine.h"
#include "runtime/kernel_call.h"
#include "runtime/workspace_pool.h"
#include "tests/runtime/load_loop_kernel.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kElements = 4;
constexpr int64_t kRefusedFloats = int64_t{1} << 48;  // 1 PiB
const TensorType kVectorType{DType::kFloat32, {kElements}};

// out[i] = in[i] + 1 through a temporary `staged` of kElements floats, and,
// when `spare_floats` > 0, a second temporary of that many floats that only
// its first element is written to.
std::shared_ptr<LoadedKernel> StagedIncrement(JitEngine& jit, int64_t spare_floats) {
  te::ExprBuilder b;
  lower::LoopFunction fn;
  fn.name = "staged_increment";
  fn.buffers = {{"in", te::ScalarType::kF32, kElements},
                {"out", te::ScalarType::kF32, kElements},
                {"staged", te::ScalarType::kF32, kElements}};
  fn.num_params = 2;
  te::Var i = b.NewVar("i", kElements);
  std::vector<lower::Stmt> body = {
      lower::MakeFor(i, lower::ForKind::kSerial,
                     lower::MakeStore(2, b.Ref(i), b.Load(0, te::ScalarType::kF32, {b.Ref(i)}))),
  };
  if (spare_floats > 0) {
    fn.buffers.push_back({"spare", te::ScalarType::kF32, spare_floats});
    body.push_back(lower::MakeStore(3, b.Int(0), b.Float(7)));
  }
  te::Var j = b.NewVar("j", kElements);
  body.push_back(lower::MakeFor(
      j, lower::ForKind::kSerial,
      lower::MakeStore(1, b.Ref(j),
                       b.Add(b.Load(2, te::ScalarType::kF32, {b.Ref(j)}), b.Float(1)))));
  fn.body = lower::MakeSeq(std::move(body));
  return LoadLoopKernel(jit, fn);
}

Program StagedProgram() {
  Program p;
  p.name = "staged";
  p.values = {{ValueSpec::Kind::kInput, "x", kVectorType, nullptr},
              {ValueSpec::Kind::kIntermediate, "y", kVectorType, nullptr}};
  p.inputs = {0};
  p.outputs = {1};
  p.output_names = {"y"};
  p.kernels = {{"staged_increment_0", {0, 1}}};
  return p;
}

Tensor Input() {
  const std::vector<float> v = {1.5f, -2.0f, 0.25f, 8.0f};
  absl::StatusOr<Tensor> t = Tensor::FromBytes(
      kVectorType, absl::string_view(reinterpret_cast<const char*>(v.data()), 4 * kElements));
  EXPECT_TRUE(t.ok());
  return *std::move(t);
}

using RefusedTemporariesTest = JitEngineTest;

TEST_F(RefusedTemporariesTest, ModelRunIsResourceExhaustedAndTheNextModelRuns) {
  std::shared_ptr<LoadedKernel> refused = StagedIncrement(*jit_, kRefusedFloats);
  std::shared_ptr<LoadedKernel> fits = StagedIncrement(*jit_, 16);
  ASSERT_NE(refused, nullptr);
  ASSERT_NE(fits, nullptr);
  auto refused_model = CompiledModel::Create(StagedProgram(), {refused});
  auto model = CompiledModel::Create(StagedProgram(), {fits});
  ASSERT_TRUE(refused_model.ok()) << refused_model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const Tensor x = Input();

  const int64_t live_before = KernelWorkspacePool().stats().live_bytes;
  absl::StatusOr<RunResult> r = (*refused_model)->Run({&x});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr(absl::StrCat("kernel staged_increment_0 did not run: the system refused ",
                                     kRefusedFloats * 4, " bytes")));
  // The temporary it did get ('staged') went back.
  EXPECT_EQ(KernelWorkspacePool().stats().live_bytes, live_before);
  EXPECT_EQ(TakeRefusedWorkspaceBytes(), 0);  // reported once, not left for the next call

  r = (*model)->Run({&x});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FloatsOf(r->outputs[0]), ElementsAre(2.5f, -1.0f, 1.25f, 9.0f));
}

TEST_F(RefusedTemporariesTest, CallKernelIsResourceExhaustedThenServesTheNextCall) {
  std::shared_ptr<LoadedKernel> refused = StagedIncrement(*jit_, kRefusedFloats);
  std::shared_ptr<LoadedKernel> plain = StagedIncrement(*jit_, 0);
  ASSERT_NE(refused, nullptr);
  ASSERT_NE(plain, nullptr);
  const Tensor x = Input();
  absl::StatusOr<KernelCallResult> r = CallKernel(*refused, {kVectorType, kVectorType}, {&x});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("kernel staged_increment did not run"));
  r = CallKernel(*plain, {kVectorType, kVectorType}, {&x});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FloatsOf(r->output), ElementsAre(2.5f, -1.0f, 1.25f, 9.0f));
}

}  // namespace
}  // namespace kiln::runtime
