#include "compiler/lower/loop_pipeline.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/lower/lane_block_vector_loops.h"
#include "compiler/lower/loop_partition.h"
#include "compiler/lower/reassociate_index.h"
#include "compiler/lower/simplify_index.h"
#include "compiler/lower/strided_vector_loops.h"

namespace kiln::lower {
namespace {

struct LoopPass {
  PassInfo info;
  Stmt (*run)(const Stmt& body, te::ExprBuilder& builder);
  // Only for generic loop nests: a scheduled kernel's loops are already shaped.
  bool generic_only = false;
};

// The order matters: partitioning makes the interior loops whose strided
// reads blocking can then see; blocking and partitioning leave the divisions
// that index simplification removes; reassociation comes last because it
// regroups whatever indices the others produced.
std::vector<LoopPass> LoopPasses() {
  return {
      {{"PartitionBoundaryLoops", 0, {}},
       [](const Stmt& s, te::ExprBuilder& b) { return PartitionBoundaryLoops(s, b); },
       true},
      {{"BlockStridedVectorLoops", 0, {}},
       [](const Stmt& s, te::ExprBuilder& b) { return BlockStridedVectorLoops(s, b); },
       true},
      {{"BlockLaneDividedVectorLoops", 0, {}},
       [](const Stmt& s, te::ExprBuilder& b) { return BlockLaneDividedVectorLoops(s, b); },
       true},
      {{"SimplifyIndices", 0, {}},
       [](const Stmt& s, te::ExprBuilder& b) { return SimplifyIndices(b, s); }},
      {{"ReassociateIndices", 0, {}},
       [](const Stmt& s, te::ExprBuilder&) { return ReassociateIndices(s); }},
  };
}

std::string PrintKernels(const std::vector<LoopKernel>& kernels) {
  std::string out;
  for (const LoopKernel& k : kernels) absl::StrAppend(&out, LoopFunctionToString(*k.function));
  return out;
}

// Whether the pass rewrote some kernel. Passes rebuild the statements they
// visit, so a new tree is compared with the old one node for node.
absl::StatusOr<bool> RunOverKernels(const LoopPass& pass, std::vector<LoopKernel>& kernels) {
  bool changed = false;
  for (LoopKernel& k : kernels) {
    if (pass.generic_only && k.scheduled) continue;
    const Stmt before = k.function->body;
    k.function->body = pass.run(before, *k.builder);
    changed |= !SameStmt(before, k.function->body);
  }
  return changed;
}

}  // namespace

std::vector<std::string> LoopPassNames() {
  std::vector<std::string> names = {kLoopPipelineName};
  for (const LoopPass& p : LoopPasses()) names.push_back(p.info.name);
  return names;
}

std::string SkippedLoopPasses(const PassContext& ctx) {
  std::string reason;
  const bool pipeline_runs = ctx.ShouldRun({kLoopPipelineName, 0, {}}, &reason);
  std::vector<std::string> skipped;
  for (const LoopPass& p : LoopPasses()) {
    if (!pipeline_runs || !ctx.ShouldRun(p.info, &reason)) skipped.push_back(p.info.name);
  }
  return absl::StrJoin(skipped, ",");
}

absl::Status RunLoopPipeline(std::vector<LoopKernel>& kernels, const PassContext& ctx) {
  const PassInfo pipeline{kLoopPipelineName, 0, {}};
  if (!AdmitPass(pipeline, ctx, 0)) return absl::OkStatus();
  auto print = [&] { return PrintKernels(kernels); };
  auto run_all = [&]() -> absl::StatusOr<bool> {
    bool changed = false;
    for (const LoopPass& pass : LoopPasses()) {
      if (!AdmitPass(pass.info, ctx, 1)) continue;
      absl::StatusOr<bool> c = RunInstrumented(
          pass.info, ctx, 1, [&] { return RunOverKernels(pass, kernels); }, print);
      if (!c.ok()) return c;
      changed |= *c;
    }
    return changed;
  };
  return RunInstrumented(pipeline, ctx, 0, run_all, print).status();
}

}  // namespace kiln::lower
