// Zero-size tensors (a dim of 0: an empty batch, a split of nothing, a
// NonZero that found nothing) have nothing to compute, and Kiln's kernels
// and schedules assume every extent is at least 1 (tiles, vector widths and
// parallel chunks divide by them). So an op with an empty output becomes an
// empty constant here, before any kernel is chosen; what remains reads
// empty tensors only where the read is inside a reduction over the empty
// dim (sum over nothing is the reduction's identity, and the loop over it
// never runs). Any other op reading an empty tensor into a non-empty one
// (a concat of an empty piece, an expand of an empty tensor: their
// branch-free selects would load from it) is Unimplemented, naming it.
// Opt level 0: a zero-size tensor must never reach lowering, whatever the
// optimisation level.
#include "compiler/passes/fold_empty.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"

namespace kiln {
namespace {

absl::StatusOr<bool> FoldEmpty(Graph& graph, const PassContext&) {
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!n->is_op()) continue;
    if (n->type.NumElements() == 0) {
      auto empty = std::make_shared<ConstantData>();
      empty->type = n->type;
      graph.ReplaceAllUses(n, graph.AddConstant(n->name, std::move(empty)));
      changed = true;
      continue;
    }
    if (n->op->pattern == OpPattern::kCommReduce) continue;
    for (const Node* in : n->inputs) {
      if (in->type.NumElements() != 0) continue;
      return absl::UnimplementedError(absl::StrCat(
          "node '", n->name, "' (", n->op->name, ") reads the zero-size tensor '", in->name, "' ",
          in->type.ToString(), " into a non-empty ", n->type.ToString(),
          "; zero-size tensors are supported where what is computed from them is empty too, "
          "or reduced"));
    }
  }
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

std::unique_ptr<Pass> CreateFoldEmptyPass() {
  return std::make_unique<FunctionPass>(PassInfo{"FoldEmpty", 0, {"InferType"}}, FoldEmpty);
}

}  // namespace kiln
