// WinogradConv: conv2d_nchwc -> conv2d_nchwc_winograd where it pays.
//
// Design note
// -----------
// A 3x3 conv at stride 1 does 9 multiply-adds per output and input channel.
// Winograd's F(4x4, 3x3) (Lavin and Gray, 2015) computes a 4x4 tile of
// outputs from a 6x6 tile of inputs with 36: each input tile is transformed
// (V = Bt d B), multiplied element by element with the transformed weights
// (U = G g Gt, computed at compile time) and summed over input channels --
// 36 independent GEMMs of tiles x channels x outputs -- and the products
// transformed back (Y = At M A). That is 4x fewer multiply-adds, for two
// transforms (adds, memory-bound) and 4x the weights. TVM and NNPACK pick
// it per conv the same way (TVM's op strategy and its tuner); ONNX
// Runtime's MLAS has no Winograd convs.
//
// The estimate (WinogradPaysOff), in cycles of one core, with F = 64 FLOPs
// a cycle (two 16-lane FMA ports):
//     direct   = max(2 * 9 * outputs * C * O / F / 0.92,  weight bytes / 16)
//     winograd = max(2 * 36 * tiles * C * O / F / 0.85,  36/9 x weight bytes / 16)
//                + 100 cycles per input tile and block of 16 channels
//                + 80 per output tile and block
// where 0.92 and 0.85 are the fractions of the FMA peak the direct conv and
// the short-K GEMMs reach, 16 bytes a cycle is the weights' stream from L3
// or memory, and the transform costs are about one cycle per vector load,
// store and add of a tile's 36 lines. A ragged edge (14x14 outputs in 4x4
// tiles compute 16x16) counts whole tiles. Winograd is taken when it is at
// most 0.8 of direct, and its weights fit kMaxWinogradWeightBytes: that
// keeps resnet18's 7x7 convs (512 channels: 37.7 MB of weights each, which
// at batch 1 would come from memory on every call) direct.
//
// F(4x4, 3x3) rounds more than the direct sum: its transforms multiply by
// up to 8 and 1/24. Over float32 inputs its error is within a few units of
// 1e-6 of the outputs' scale (winograd_conv_test measures it against
// float64); `--disable-passes WinogradConv` (or opt level 1) keeps every
// conv direct.
#include "compiler/passes/winograd_conv.h"

#include <algorithm>
#include <variant>

#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"

namespace kiln {
namespace {

bool IsCandidate(const Node& n) {
  if (!n.is_op() || n.op->name != "conv2d_nchwc" || n.inputs.size() < 2) return false;
  if (!std::holds_alternative<Conv2DAttrs>(n.attrs)) return false;
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(n.attrs);
  const std::vector<int64_t>& w = n.inputs[1]->type.shape;
  if (w.size() != 6 || n.type.rank() != 5) return false;
  return a.groups == 1 && w[2] == 3 && w[3] == 3 && w[4] == 16 && w[5] == 16 && a.strides[0] == 1 &&
         a.strides[1] == 1 && a.dilation[0] == 1 && a.dilation[1] == 1 &&
         n.type.dtype == DType::kFloat32 && n.inputs[1]->is_constant();
}

absl::StatusOr<bool> WinogradConv(Graph& graph, const PassContext&) {
  const OpDef* winograd = OpRegistry::Default().Find("conv2d_nchwc_winograd");
  if (winograd == nullptr) return absl::InternalError("conv2d_nchwc_winograd is not registered");
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!IsCandidate(*n)) continue;
    const std::vector<int64_t>& w = n->inputs[1]->type.shape;
    const std::vector<int64_t>& o = n->type.shape;
    if (!WinogradPaysOff(o[0], w[1] * 16, w[0] * 16, o[2], o[3])) continue;
    Node* rewritten = graph.AddOp(n->name, winograd, n->inputs, n->attrs);
    rewritten->type = n->type;
    rewritten->type_known = true;
    graph.ReplaceAllUses(n, rewritten);
    changed = true;
  }
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

bool WinogradPaysOff(int64_t images, int64_t channels, int64_t outputs, int64_t height,
                     int64_t width) {
  constexpr double kFlopsPerCycle = 64, kBytesPerCycle = 16;
  const double c = static_cast<double>(channels), k = static_cast<double>(outputs);
  const double pixels = static_cast<double>(images * height * width);
  const double tiles = static_cast<double>(images * ((height + 3) / 4) * ((width + 3) / 4));
  const double weight_bytes = 9 * c * k * 4;
  if (4 * weight_bytes > static_cast<double>(kMaxWinogradWeightBytes)) return false;
  const double direct =
      std::max(2 * 9 * pixels * c * k / kFlopsPerCycle / 0.92, weight_bytes / kBytesPerCycle);
  const double winograd =
      std::max(2 * 36 * tiles * c * k / kFlopsPerCycle / 0.85, 4 * weight_bytes / kBytesPerCycle) +
      100 * tiles * c / 16 + 80 * tiles * k / 16;
  return winograd <= 0.8 * direct;
}

std::unique_ptr<Pass> CreateWinogradConvPass() {
  return std::make_unique<FunctionPass>(PassInfo{"WinogradConv", 2, {"InferType"}}, WinogradConv);
}

}  // namespace kiln
