// A bounds-checked kernel's fault through the runtime's two callers: a
// model's run (CompiledModel::Run) and a single kernel call (CallKernel)
// return Internal naming the kernel, the buffer and the index, not a crash,
// and serve the next call as before. The kernel is a hand-built gather whose
// row indices are a model input, so that nothing before the kernel checks
// them (as the runtime does for a graph's gather).
#include "runtime/kernel_fault.h"

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/jit_engine.h"
#include "runtime/kernel_call.h"
#include "tests/runtime/load_loop_kernel.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kTableSize = 10;
constexpr int64_t kRows = 3;

const TensorType kTableType{DType::kFloat32, {kTableSize}};
const TensorType kIdsType{DType::kInt64, {kRows}};
const TensorType kRowsType{DType::kFloat32, {kRows}};

// out[i] = table[ids[i]], with bounds checks as `checks` says.
std::shared_ptr<LoadedKernel> GatherKernel(JitEngine& jit, bool checks) {
  te::ExprBuilder b;
  lower::LoopFunction fn;
  fn.name = "gather_rows";
  fn.buffers = {{"table", te::ScalarType::kF32, kTableSize},
                {"ids", te::ScalarType::kI64, kRows},
                {"out", te::ScalarType::kF32, kRows}};
  fn.num_params = 3;
  te::Var i = b.NewVar("i", kRows);
  te::Expr id = b.Load(1, te::ScalarType::kI64, {b.Ref(i)});
  fn.body = lower::MakeFor(i, lower::ForKind::kSerial,
                           lower::MakeStore(2, b.Ref(i), b.Load(0, te::ScalarType::kF32, {id})));
  codegen::CodegenOptions options;
  options.bounds_checks = checks;
  return LoadLoopKernel(jit, fn, options);
}

// inputs "table" and "row_ids", output "rows", one call "gather_rows_0".
Program GatherProgram() {
  Program p;
  p.name = "gather";
  p.values = {{ValueSpec::Kind::kInput, "table", kTableType, nullptr},
              {ValueSpec::Kind::kInput, "row_ids", kIdsType, nullptr},
              {ValueSpec::Kind::kIntermediate, "rows", kRowsType, nullptr}};
  p.inputs = {0, 1};
  p.outputs = {2};
  p.output_names = {"rows"};
  p.kernels = {{"gather_rows_0", {0, 1, 2}}};
  return p;
}

Tensor Table() {
  std::vector<float> t(kTableSize);
  for (int64_t i = 0; i < kTableSize; ++i) t[i] = 10.0f * i + 0.5f;
  absl::StatusOr<Tensor> out = Tensor::FromBytes(
      kTableType, absl::string_view(reinterpret_cast<const char*>(t.data()), 4 * kTableSize));
  EXPECT_TRUE(out.ok());
  return *std::move(out);
}

Tensor Ids(std::vector<int64_t> ids) {
  absl::StatusOr<Tensor> out = Tensor::FromBytes(
      kIdsType, absl::string_view(reinterpret_cast<const char*>(ids.data()), 8 * kRows));
  EXPECT_TRUE(out.ok());
  return *std::move(out);
}

using KernelFaultTest = JitEngineTest;

TEST_F(KernelFaultTest, ModelRunReturnsInternalNamingKernelBufferAndIndex) {
  std::shared_ptr<LoadedKernel> kernel = GatherKernel(*jit_, true);
  ASSERT_NE(kernel, nullptr);
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      CompiledModel::Create(GatherProgram(), {kernel});
  ASSERT_TRUE(model.ok()) << model.status();
  const Tensor table = Table();

  const Tensor bad = Ids({2, 12, 0});
  absl::StatusOr<RunResult> r = (*model)->Run({&table, &bad});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  const std::string message(r.status().message());
  EXPECT_THAT(message, HasSubstr("kernel 'gather_rows_0'"));
  EXPECT_THAT(message, HasSubstr("loaded from element 12 of 'table' (parameter 0)"));
  EXPECT_THAT(message, HasSubstr("which has 10 elements"));

  // The model serves the next call, with the rows a plain loop picks.
  const Tensor good = Ids({2, 9, 0});
  r = (*model)->Run({&table, &good});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FloatsOf(r->outputs[0]), ElementsAre(20.5f, 90.5f, 0.5f));
}

TEST_F(KernelFaultTest, ValidIndicesGiveTheSameRowsCheckedOrNot) {
  const Tensor table = Table();
  const Tensor ids = Ids({7, 0, 9});
  for (bool checks : {false, true}) {
    SCOPED_TRACE(checks ? "checked" : "unchecked");
    std::shared_ptr<LoadedKernel> kernel = GatherKernel(*jit_, checks);
    ASSERT_NE(kernel, nullptr);
    absl::StatusOr<std::unique_ptr<CompiledModel>> model =
        CompiledModel::Create(GatherProgram(), {kernel});
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<RunResult> r = (*model)->Run({&table, &ids});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(FloatsOf(r->outputs[0]), ElementsAre(70.5f, 0.5f, 90.5f));
  }
}

TEST_F(KernelFaultTest, CallKernelReturnsInternalNamingTheInput) {
  std::shared_ptr<LoadedKernel> kernel = GatherKernel(*jit_, true);
  ASSERT_NE(kernel, nullptr);
  const Tensor table = Table();
  const Tensor bad = Ids({-1, 0, 0});
  absl::StatusOr<KernelCallResult> r =
      CallKernel(*kernel, {kTableType, kIdsType, kRowsType}, {&table, &bad});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("kernel 'gather_rows' loaded from element -1 of 'input 0'"));
  const Tensor good = Ids({1, 1, 3});
  r = CallKernel(*kernel, {kTableType, kIdsType, kRowsType}, {&table, &good});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FloatsOf(r->output), ElementsAre(10.5f, 10.5f, 30.5f));
}

TEST(KernelFaultStatusTest, NoFaultIsOkAndTemporariesAreNumbered) {
  abi::KernelFault fault;
  EXPECT_TRUE(KernelFaultStatus(fault, "k", {"a", "b"}).ok());
  fault.faulted = 1;
  fault.buffer = 3;
  fault.index = 64;
  fault.num_elements = 64;
  fault.is_store = 1;
  absl::Status s = KernelFaultStatus(fault, "k", {"a", "b"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("kernel 'k' stored to element 64 of temporary 1 (buffer 3), which has "
                        "64 elements"));
}

}  // namespace
}  // namespace kiln::runtime
