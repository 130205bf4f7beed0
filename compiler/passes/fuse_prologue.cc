// FusePrologue: an elementwise producer joins the contraction that reads it.
//
// FuseOps (fuse_ops.cc), like TVM's, fuses a conv or matmul (OutEWiseFusable)
// only with the elementwise ops after it, its epilogue. An elementwise op in
// front of one stays a kernel of its own, one more pass over the activation
// in memory, whenever it cannot join its own producer's epilogue either --
// because it reads a second value that is not ready there:
//
//     x ---> global pool -> fc -> relu -> fc -> hardsigmoid      (SE block)
//     |                                              |
//     `------------------------> mul <---------------'   s[n, c]
//                                 |
//                               conv 1x1                 reads x * s
//
//     a + b (residual sum, also read by the next block) -> BN -> relu -> conv
//                                                     (pre-activation ResNet)
//
// This pass runs on FuseOps' groups and merges such a producer group P into
// the group of its consumer C when:
//   - every op of P is elementwise or broadcast, or a layout_transform
//     (ConvertLayoutNchwc puts one between a pre-activation and its blocked
//     conv; the blocked conv's copy reads through it once per element);
//   - P's value is float32 and read by one op only: a conv2d,
//     conv2d_nchwc or conv2d_nchwc_winograd_f2/_f4 as its data input (not its weights; conv2d of
//     dilation 1 and stride at most 4, the convs lowering reads in place), or a dense or matmul
//     (either operand);
//   - P reads at most one tensor about its own size (the activation) and
//     otherwise only small ones (per channel, per (n, c), constants): at
//     most 1/kSmallRatio of its size, so that applying P on the way into
//     the contraction costs about one load of the activation per element;
//   - C holds no other contraction and no reduction, and the merged group
//     stays within fuse_max_depth ops.
// Merging cannot make a cycle: P's value goes nowhere but into C.
//
// How it differs from TVM, which never fuses a producer into a conv: TVM's
// conv schedules read the input in place, so an inlined producer would run
// for every output channel and window position (K*K*O times per element).
// Kiln's lowering reads a conv's input through a copy where it matters, and
// inlines the group's producers there (group_context.h's ValueOf), so P
// runs once per element, or where it is read in place it is cheap enough:
//   - a padded conv2d's input is copied into the zero-padded buffer the
//     micro-kernel reads (conv_padding.cc): P runs in the copy, which
//     selects zero outside the input, so the padding stays the conv's
//     zeros, not P(0) (BN's shift);
//   - conv2d_nchwc copies its input into a padded blocked buffer
//     (blocked_conv.cc); with a prologue it does so without padding too;
//   - conv2d_nchwc_winograd_f2/_f4 copy their input into a zero-padded
//     buffer of whole tiles (winograd_conv.cc): P runs there, once per
//     element, and the padding stays zeros, not P(0);
//   - dense and matmul pack an activation operand into panels: P runs in
//     the packing (the in-place read of A wants a plain load);
//   - a 1x1 conv2d without padding reads its input in place: with P, it
//     reads P's activation in place instead and applies P per load
//     (contraction_schedule.cc sees through P to the load). Under channel
//     lanes each load is one pixel's broadcast, once per tile of output
//     channels, so only a plain channel scale (the SE block's) is fused
//     there, and the schedule multiplies the weights' vector by it instead,
//     once per channel and vector (TileProduct in contraction_emit.cc);
//     flat tiles pack the input, and the scale with it. Measured against
//     the alternatives on mobilenet_v3_large's eight SE convs (b1, 1
//     thread, per-kernel medians of 6 alternating runs): apart 1.06 ms; the
//     scale computed into a buffer at the start of the kernel, read in
//     place, 1.18; the scale per pixel load 1.05; on the weights 1.03 (and
//     1.15 -> 1.03 in a second set). A BN + ReLU per pixel load made the
//     1x1 convs of a pre-activation model 48% slower (0.326 -> 0.481 ms,
//     256 -> 512 channels at 14x14), so those stay apart.
//
// Measured on an Intel Xeon Processor (AVX-512), 2 cores shared with three
// other jobs: kiln-bench --iterations 40, one build alternating with and
// without --disable-passes FusePrologue, 4-6 runs each; the sum over the
// kernels that differ (the prologue kernels against the producers' own
// kernels plus their convs) of each kernel's median across runs. Whole-
// model p50s moved by 2-3x with the machine's load (mobilenet_v3 b1 from
// 5 to 22 ms in one set), so they show nothing at this size.
//                          kernels    b1 1 thr     b1 2 thr     b8 1 thr
//   mobilenet_v3_large    81 -> 73   1.18->1.06   1.22->1.03   9.25->8.05 ms
//                                    1.06->1.00   1.12->0.95   8.92->8.47 (set 2)
//   regnet_y_400mf       119 -> 103  2.45->2.45   2.59->2.51   20.5->20.3
//   pre-activation, NCHW  12 -> 8    6.42->6.26   6.60->6.32
//   pre-activation, NCHWc 16 -> 12   5.44->5.54   4.19->4.19   60.6->62.6
// (b8 runs as 8 chunks of 1, engine/row_chunks.h; b8 at 2 threads moved by
// +-50% between sets and is left out. Pre-activation: bench/models.py's
// preact_blocks, NCHW with --nchwc off, blocked by default.)
// The SE scale's kernel was 3-15% of its conv's time; fused, the conv
// reads the activation directly and the weights' vector takes the scale.
// Blocked convs gain nothing yet: their padded copy gathers through the
// layout_transform as the separate kernel did, with a select per element.
#include "compiler/passes/fuse_prologue.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "compiler/ir/op_def.h"

namespace kiln {
namespace {

// A producer's other inputs are "small" at this fraction of its size or less.
constexpr int64_t kSmallRatio = 8;

Node* RootOf(Node* n) { return n->group_root ? n->group_root : n; }

bool IsContraction(const Node* n) {
  const std::string& name = n->op->name;
  return name == "conv2d" || name == "conv2d_nchwc" || name == "conv2d_nchwc_winograd_f2" ||
         name == "conv2d_nchwc_winograd_f4" || name == "dense" || name == "matmul";
}

// Whether `consumer` may read `value`, computed by `group`, through a
// prologue: as a conv's data input, or as either matmul operand.
bool ReadsAsPrologue(const Node* consumer, const Node* value, const std::vector<Node*>& group) {
  const std::string& name = consumer->op->name;
  if (name == "matmul") return true;
  for (size_t i = 1; i < consumer->inputs.size(); ++i) {
    if (consumer->inputs[i] == value) return false;
  }
  if (name != "conv2d") return true;
  const auto* a = std::get_if<Conv2DAttrs>(&consumer->attrs);
  if (a == nullptr || a->dilation != std::vector<int64_t>{1, 1} || a->strides[0] > 4 ||
      a->strides[1] > 4) {
    return false;
  }
  // A 1x1 conv without padding reads its input in place, P per load: only
  // a channel scale, which the schedule moves onto the weights, pays there.
  const std::vector<int64_t>& ws = consumer->inputs[1]->type.shape;
  const bool pointwise =
      ws.size() == 4 && ws[2] == 1 && ws[3] == 1 &&
      std::all_of(a->padding.begin(), a->padding.end(), [](int64_t p) { return p == 0; });
  return !pointwise || (group.size() == 1 && group[0]->op->name == "mul");
}

class PrologueFuser {
 public:
  PrologueFuser(Graph& graph, int max_depth) : max_depth_(max_depth) {
    for (Node* out : graph.outputs()) outputs_.insert(out);
    order_ = graph.TopologicalOrder();
    for (Node* n : order_) {
      if (!n->is_op()) continue;
      members_[RootOf(n)].push_back(n);
      std::unordered_set<Node*> seen;
      for (Node* in : n->inputs) {
        if (seen.insert(in).second) users_[in].push_back(n);
      }
    }
  }

  bool Run() {
    bool changed = false;
    for (Node* n : order_) {
      if (!n->is_op() || RootOf(n) != n) continue;
      Node* consumer = PrologueConsumer(n);
      if (consumer == nullptr) continue;
      Node* target = RootOf(consumer);
      std::vector<Node*>& into = members_[target];
      for (Node* m : members_[n]) {
        m->group_root = target;
        into.push_back(m);
      }
      members_.erase(n);
      changed = true;
    }
    return changed;
  }

 private:
  // The contraction that group `root` may join as its prologue, or null.
  Node* PrologueConsumer(Node* root) {
    if (outputs_.count(root) || root->type.dtype != DType::kFloat32) return nullptr;
    const std::vector<Node*>& group = members_[root];
    const std::unordered_set<const Node*> in_group(group.begin(), group.end());
    for (const Node* m : group) {
      if (m->op->pattern > OpPattern::kBroadcast && m->op->name != "layout_transform") {
        return nullptr;
      }
      if (m == root) continue;
      for (const Node* user : users_[m]) {
        if (!in_group.count(user)) return nullptr;
      }
    }
    const std::vector<Node*>& users = users_[root];
    if (users.size() != 1) return nullptr;
    Node* consumer = users[0];
    if (!IsContraction(consumer) || consumer->type.dtype != DType::kFloat32 ||
        !ReadsAsPrologue(consumer, root, group) || !ReadsSmallInputs(group, in_group, root)) {
      return nullptr;
    }
    const std::vector<Node*>& target = members_[RootOf(consumer)];
    if (static_cast<int>(group.size() + target.size()) > max_depth_) return nullptr;
    for (const Node* m : target) {
      if (m != consumer && m->op->pattern > OpPattern::kInjective) return nullptr;
    }
    return consumer;
  }

  // At most one input from outside the group larger than 1/kSmallRatio of
  // its value, and that one no larger than the value.
  static bool ReadsSmallInputs(const std::vector<Node*>& group,
                               const std::unordered_set<const Node*>& in_group, const Node* root) {
    const int64_t size = root->type.NumElements();
    const Node* large = nullptr;
    for (const Node* m : group) {
      for (const Node* in : m->inputs) {
        const int64_t n = in->type.NumElements();
        if (in_group.count(in) || n * kSmallRatio <= size) continue;
        if (n > size || (large != nullptr && large != in)) return false;
        large = in;
      }
    }
    return true;
  }

  int max_depth_;
  std::unordered_set<const Node*> outputs_;
  std::vector<Node*> order_;
  // Each group's ops in topological order, by root; each value's op readers.
  std::unordered_map<Node*, std::vector<Node*>> members_;
  std::unordered_map<const Node*, std::vector<Node*>> users_;
};

absl::StatusOr<bool> FusePrologue(Graph& graph, const PassContext& ctx) {
  return PrologueFuser(graph, std::max(1, ctx.config.fuse_max_depth)).Run();
}

}  // namespace

std::unique_ptr<Pass> CreateFuseProloguePass() {
  return std::make_unique<FunctionPass>(PassInfo{"FusePrologue", 1, {"FuseOps"}}, FusePrologue);
}

}  // namespace kiln
