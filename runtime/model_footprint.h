// The memory a compiled model holds while it is loaded, known from its
// program before any of it is allocated: the server admits or refuses a
// model by it (engine/memory_budget.h) and reports it per model.
#ifndef KILN_RUNTIME_MODEL_FOOTPRINT_H_
#define KILN_RUNTIME_MODEL_FOOTPRINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/program.h"
#include "runtime/memory_plan.h"

namespace kiln::runtime {

struct ModelFootprint {
  int64_t constant_bytes = 0;  // weights, copied into aligned tensors
  // One call's intermediates (memory_plan.h). A call running while another
  // does takes an arena of its own, kept for the next.
  int64_t arena_bytes = 0;
  // The most one of its kernels takes from the kernel workspace pool while
  // it runs (KernelCall::temp_bytes): a call's kernels run one at a time.
  int64_t temp_bytes = 0;
  // Object bytes of its distinct kernels (what the JIT links; shared with
  // any other model that uses the same kernel). 0 before they are loaded.
  int64_t code_bytes = 0;
  // The largest single value, input, output, intermediate or constant: the
  // most one allocation of a call can need. Its name and type for messages.
  int64_t largest_value_bytes = 0;
  std::string largest_value;

  int64_t held_bytes() const { return constant_bytes + arena_bytes + temp_bytes + code_bytes; }
};

// `program`'s footprint without code, planning its memory into `*plan`
// when given. ResourceExhausted naming the value when one is larger than
// kMaxTensorBytes (no call could allocate it), or naming the size when
// the intermediates, or one kernel's temporaries, need more than that at
// once.
absl::StatusOr<ModelFootprint> PlanFootprint(const Program& program, MemoryPlan* plan = nullptr);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_MODEL_FOOTPRINT_H_
