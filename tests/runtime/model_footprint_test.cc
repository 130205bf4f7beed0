// What a compiled model holds loaded, as PlanFootprint sees it from the
// program alone and CompiledModel reports it once its kernels are linked:
// constants by their bytes, intermediates by the planned arena, code by the
// distinct kernels' objects; and a value no call could allocate refused
// before anything is.
#include "runtime/model_footprint.h"

#include <memory>
#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/jit_engine.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

// x: f32[4] -> t = f(x, c): f32[1024] -> y = g(t): f32[4], c a constant
// f32[256] (returned in `*constant` when asked). Kernels are named, not run.
Program ChainProgram(std::shared_ptr<const ConstantData>* constant = nullptr) {
  auto c = std::make_shared<ConstantData>();
  c->type = {DType::kFloat32, {256}};
  c->bytes.assign(256 * 4, '\0');
  Program p;
  p.name = "chain";
  p.values = {{ValueSpec::Kind::kInput, "x", {DType::kFloat32, {4}}, nullptr},
              {ValueSpec::Kind::kConstant, "c", c->type, c},
              {ValueSpec::Kind::kIntermediate, "t", {DType::kFloat32, {1024}}, nullptr},
              {ValueSpec::Kind::kIntermediate, "", {DType::kFloat32, {4}}, nullptr}};
  p.inputs = {0};
  p.outputs = {3};
  p.output_names = {"y"};
  p.kernels = {{"f", {0, 1, 2}}, {"g", {2, 3}}};
  if (constant != nullptr) *constant = c;
  return p;
}

TEST(ModelFootprintTest, CountsConstantsAndThePlannedArena) {
  absl::StatusOr<ModelFootprint> f = PlanFootprint(ChainProgram());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->constant_bytes, 256 * 4);
  EXPECT_EQ(f->arena_bytes, 1024 * 4);  // t only: the output is the caller's tensor
  EXPECT_EQ(f->code_bytes, 0);
  EXPECT_EQ(f->held_bytes(), 256 * 4 + 1024 * 4);
  EXPECT_EQ(f->largest_value_bytes, 1024 * 4);
  EXPECT_THAT(f->largest_value, HasSubstr("'t'"));
}

// A call runs its kernels one at a time: the largest one's temporaries
// count, once.
TEST(ModelFootprintTest, CountsTheLargestKernelsTemporaries) {
  Program p = ChainProgram();
  p.kernels[0].temp_bytes = 3000;
  p.kernels[1].temp_bytes = 5000;
  absl::StatusOr<ModelFootprint> f = PlanFootprint(p);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->temp_bytes, 5000);
  EXPECT_EQ(f->held_bytes(), 256 * 4 + 1024 * 4 + 5000);

  p.kernels[1].temp_bytes = kMaxTensorBytes + 1;
  absl::Status s = PlanFootprint(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel g's temporaries"));
}

TEST(ModelFootprintTest, AValueNoCallCouldAllocateIsResourceExhaustedNamingIt) {
  Program p = ChainProgram();
  p.values[3].type.shape = {int64_t{1} << 20, int64_t{1} << 15};  // 128 GiB of float
  absl::Status s = PlanFootprint(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // The unnamed output value goes by the graph's name for it.
  EXPECT_THAT(std::string(s.message()), HasSubstr("value 'y' (float32[1048576,32768])"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("4 GiB limit"));
}

TEST(ModelFootprintTest, ACompiledModelCountsAKernelItCallsTwiceOnce) {
  auto jit = JitEngine::Create();
  ASSERT_TRUE(jit.ok()) << jit.status();
  te::ExprBuilder b;
  lower::LoopFunction fn;
  fn.name = "copy4";
  fn.buffers = {{"in", te::ScalarType::kF32, 4}, {"out", te::ScalarType::kF32, 4}};
  fn.num_params = 2;
  te::Var i = b.NewVar("i", 4);
  fn.body = lower::MakeFor(i, lower::ForKind::kSerial,
                           lower::MakeStore(1, b.Ref(i), b.Load(0, te::ScalarType::kF32,
                                                                {b.Ref(i)})));
  absl::StatusOr<std::string> object = codegen::CompileToObject(fn, {});
  ASSERT_TRUE(object.ok()) << object.status();
  auto kernel = (*jit)->Load(*object, fn.name);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->object_bytes(), static_cast<int64_t>(object->size()));
  std::shared_ptr<const ConstantData> constant;
  auto model = CompiledModel::Create(ChainProgram(&constant), {*kernel, *kernel});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelFootprint& f = (*model)->footprint();
  EXPECT_EQ(f.code_bytes, static_cast<int64_t>(object->size()));
  EXPECT_EQ(f.held_bytes(), 256 * 4 + 1024 * 4 + f.code_bytes);
  // Its constants are held once, in the model's aligned copy: the
  // program's bytes are let go.
  EXPECT_EQ(constant.use_count(), 1);
  EXPECT_EQ((*model)->program().values[1].constant, nullptr);
}

}  // namespace
}  // namespace kiln::runtime
