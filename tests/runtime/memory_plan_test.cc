// Memory planning with a concat made in place (concat_in_place.cc): its
// slices take no bytes of their own, and the concat's bytes are live from
// its first slice's write, so a value live in between gets other bytes.
#include "runtime/memory_plan.h"

#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

ValueSpec Value(ValueSpec::Kind kind, const char* name, int64_t elements) {
  ValueSpec v;
  v.kind = kind;
  v.name = name;
  v.type = {DType::kFloat32, {elements}};
  return v;
}

// k0: x -> a;  k1: x -> u;  k2: u -> b;  k3: cat -> y (a graph output),
// with a and b the two halves of cat (f32[16] each, b at byte 64).
Program ConcatProgram() {
  Program p;
  p.values = {Value(ValueSpec::Kind::kInput, "x", 16),
              Value(ValueSpec::Kind::kIntermediate, "a", 16),
              Value(ValueSpec::Kind::kIntermediate, "u", 32),
              Value(ValueSpec::Kind::kIntermediate, "b", 16),
              Value(ValueSpec::Kind::kIntermediate, "cat", 32),
              Value(ValueSpec::Kind::kIntermediate, "y", 32)};
  p.values[1].alias_of = 4;
  p.values[3].alias_of = 4;
  p.values[3].alias_offset = 64;
  p.inputs = {0};
  p.outputs = {5};
  p.kernels = {{"k0", {0, 1}}, {"k1", {0, 2}}, {"k2", {2, 3}}, {"k3", {4, 5}}};
  return p;
}

TEST(MemoryPlanTest, ConcatSlicesShareTheConcatsBytesLiveFromTheFirstSlice) {
  const MemoryPlan plan = PlanMemory(ConcatProgram());
  EXPECT_EQ(plan.offsets[1], -1);  // a and b: inside cat
  EXPECT_EQ(plan.offsets[3], -1);
  ASSERT_GE(plan.offsets[2], 0);
  ASSERT_GE(plan.offsets[4], 0);
  // u (k1 to k2) lives while cat does (k0, when a is written, to k3).
  const bool apart =
      plan.offsets[2] + 128 <= plan.offsets[4] || plan.offsets[4] + 128 <= plan.offsets[2];
  EXPECT_TRUE(apart) << "u at " << plan.offsets[2] << ", cat at " << plan.offsets[4];
  EXPECT_EQ(plan.arena_bytes, 256);
}

// A concat that is a graph output lives in the caller's tensor: neither it
// nor its slices take arena bytes.
TEST(MemoryPlanTest, SlicesOfAGraphOutputTakeNoArenaBytes) {
  Program p = ConcatProgram();
  p.outputs = {4};
  p.kernels.pop_back();
  const MemoryPlan plan = PlanMemory(p);
  EXPECT_EQ(plan.offsets[1], -1);
  EXPECT_EQ(plan.offsets[3], -1);
  EXPECT_EQ(plan.offsets[4], -1);
  EXPECT_EQ(plan.arena_bytes, 128);  // u alone
}

}  // namespace
}  // namespace kiln::runtime
