// Where each intermediate value lives in one per-call arena: values whose
// lifetimes (first writer to last reader, in kernel order) do not overlap
// share bytes. See memory_plan.cc.
#ifndef KILN_RUNTIME_MEMORY_PLAN_H_
#define KILN_RUNTIME_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

#include "compiler/program.h"

namespace kiln::runtime {

struct MemoryPlan {
  // Byte offset of each intermediate value in the arena; -1 for other values,
  // including graph outputs (they live in the call's result tensors).
  std::vector<int64_t> offsets;
  int64_t arena_bytes = 0;  // the peak: what one call allocates
  int64_t naive_bytes = 0;  // every intermediate apart, for comparison
};

MemoryPlan PlanMemory(const Program& program);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_MEMORY_PLAN_H_
