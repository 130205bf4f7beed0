// conv2d_nchwc_winograd_f2, _f3 and _f4 lowered as Winograd's F(m x m, 3x3):
// an input transform, (m + 2)^2 GEMMs under the contraction
// schedule, and an output transform that applies the group's epilogue
// (design note in the .cc).
#ifndef KILN_COMPILER_LOWER_WINOGRAD_CONV_H_
#define KILN_COMPILER_LOWER_WINOGRAD_CONV_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"

namespace kiln::lower {

// LoneAnchor for conv2d_nchwc_winograd_f2, _f3 or _f4.
const Node* WinogradConv(const GroupContext& g);

// m of the conv's F(m x m, 3x3): 2, 3 or 4.
int WinogradTile(const Node* conv);

// The stages around the GEMMs, and the weights they read.
struct WinogradStages {
  int tile = 2;           // m of F(m x m, 3x3)
  Stmt input_transform;   // input -> V (alpha^2, tiles, C)
  Stmt output_transform;  // M (alpha^2, tiles, O) -> the group's output
  // The weight parameter, now U (alpha^2, C, O): its constant, and what the
  // parameter's buffer and shape were (restored if the GEMMs are not tiled).
  int weight_param = -1;
  std::shared_ptr<const ConstantData> weights;
  int64_t weight_elements = 0;
  std::vector<int64_t> weight_shape;
};

// Adds V and M to `fn`, makes the weight parameter U, and points `target`
// at the GEMMs M[e] = V[e] x U[e] (out_vars, out_index, value, out_buffer).
// Nullopt, nothing changed, when the weights are not a float32 constant.
std::optional<WinogradStages> PrepareWinogradConv(GroupContext& g, const Node* conv,
                                                  LoopFunction& fn, ContractionTarget& target);

// U = G g Gt of F(tile x tile, 3x3) for weights (O/16, C/16, 3, 3, 16, 16),
// as ((tile + 2)^2, C, O) float32.
std::shared_ptr<const ConstantData> WinogradWeights(const ConstantData& weights, int tile);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_WINOGRAD_CONV_H_
