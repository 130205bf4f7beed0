// Lowers one fused group to a LoopFunction (see lower_group.cc for the method).
#ifndef KILN_COMPILER_LOWER_LOWER_GROUP_H_
#define KILN_COMPILER_LOWER_LOWER_GROUP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/lower/schedule_override.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

struct LoweredGroup {
  LoopFunction function;
  // The group's external inputs in parameter order (the output is the last param).
  std::vector<const Node*> params;
  // Canonical structural form: ops, attributes, types, topology, baked constants.
  std::string canonical;
  // Constants the schedule repacked at compile time, standing in for the
  // graph's constants in `params` (owned here; the program copies their data).
  std::vector<std::unique_ptr<Node>> packed_params;
  // The schedule applied, when a special one was ("gemm 8x32 M=.. N=.. K=..").
  std::string schedule;
  // The contraction's shape, when the contraction schedule applied.
  std::optional<ContractionShape> contraction;
  // The override the schedule followed ("" for the estimate's plan), and
  // why one was ignored.
  std::string tuned;
  std::string override_ignored;
  // Whether that schedule shaped the loops (see LoopKernel::scheduled).
  bool scheduled = false;
  // The builder `function`'s expressions were made by, for the loop passes.
  std::unique_ptr<te::ExprBuilder> builder;
};

// `members`: the group's op nodes in topological order; the last is the root,
// whose value the group produces. `overrides`, if set, is asked for the
// group's contraction schedule by its canonical form. `knobs`: the
// contraction schedule's, null for the host's (HostContractionKnobs).
LoweredGroup LowerGroup(const std::vector<const Node*>& members, const std::string& name,
                        const ScheduleOverrideLookup& overrides = nullptr,
                        const ContractionKnobs* knobs = nullptr);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LOWER_GROUP_H_
