// FuseOps, after TVM's relay/transforms/fuse_ops.cc.
//
// 1. Indexed forward graph: the op nodes in post-DFS order (producers first),
//    each with its consumer edges. An edge carries the consumer's pattern, except
//    that a broadcasting consumer whose output has this operand's shape counts as
//    ElemWise on that edge. Graph outputs are "extern": nothing fuses past them.
// 2. Post-dominator tree, built in reverse post-DFS order: a node's immediate
//    post-dominator is the LCA (in the tree built so far) of its consumers; the
//    node also records the max pattern over the edges and tree steps it crossed.
//
//        conv2d            conv2d's ipdom is add: every path from conv2d
//        /  |  \           reaches it, so the three branches and add can
//      exp relu tanh       join conv2d's group if each path only crosses
//        \  |  /           patterns the rule allows (CheckPath).
//          add
//
// 3. Three phases over the nodes in post-DFS order, merging a node's group into
//    its ipdom's group (union-find, CommitFuse merges every node on the paths):
//    phase 0: OutEWiseFusable (dense, conv2d) into an ElemWise ipdom when every
//             path is at most Broadcast; ElemWise/Broadcast into Injective or
//             CommReduce ipdoms;
//    phase 1: Injective into its ipdom along all-Injective paths;
//    phase 2: Injective into intermediate tuples (none are produced yet).
//    A merge is skipped when the group would exceed max_fuse_depth ops.
//
// Where Kiln goes further than TVM: a reduction (CommReduce) also fuses into an
// ElemWise/Broadcast ipdom — its epilogue — in a phase of its own before phase
// 0, and CheckPath treats reaching a node already in the sink's group as
// reaching the sink. So exp -> sum -> divide (softmax written out) becomes one
// kernel, where TVM makes three: lowering hoists the row sum into a small
// temporary and computes exp in registers twice, and the exp tensor never goes
// to memory. An OutEWiseFusable op (dense, conv2d) still never fuses into a
// group holding a reduction, which would recompute it per reduced element.
// And an injective chain (slice, reshape, transpose, with elementwise ops)
// whose every path ends in a dense or matmul joins that op in phase 1 as part
// of its operand (FuseIntoOperand): attention's head split and merge stop
// being copy kernels. TVM keeps them apart.
// Last, a reduction group may also cross a second reduction on its way to its
// ipdom when both reduce the same axes of tensors of one shape (FuseRowPair):
// LayerNorm written out (mean, then the mean of the centred squares) and
// softmax written out (max, then the sum of exps) are one group, and
// lowering computes both row values for a row while the row is still in L1
// (lower_group.cc, step 5).
//
//      x ---> mean ---> sub ---> pow ---> mean ---> add eps ---> sqrt
//              (row 1)    \                (row 2)                 |
//                          `-------------------------------------> div -> mul -> add
//
// TVM stops both reductions at their own groups: three kernels, the row
// read three times from memory. Why a fusion rule and not a layer_norm op
// (issue 23): PyTorch exports LayerNorm decomposed at opset < 17, so an op
// would need a pattern matcher beside the importer's own decomposition, and
// it would cover LayerNorm only. The rule takes both forms, softmax and
// MeanVarianceNormalization written out, and the residual add in front
// (an elementwise producer, phase 0), with lowering unchanged but for the
// one row-by-row schedule it needed anyway.
// Inputs and constants are never fused: they become kernel parameters.
// An elementwise producer of a conv or matmul stays apart here; the next
// pass, FusePrologue (fuse_prologue.cc), puts it in front of that
// contraction where lowering can apply it on the way in.
#include "compiler/passes/fuse_ops.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "compiler/ir/op_def.h"

namespace kiln {
namespace {

struct Edge {
  int node;  // consumer index
  OpPattern pattern;
};

struct ForwardNode {
  Node* node;
  OpPattern pattern;
  bool extern_ref = false;
  std::vector<Edge> outputs;
};

struct DomNode {
  int parent = -1;
  int depth = 0;
  OpPattern pattern = OpPattern::kElemWise;
};

struct Group {
  int parent = -1;  // union-find; -1 for a root
  OpPattern pattern;
  int num_nodes = 1;
};

OpPattern CombinePattern(OpPattern a, OpPattern b) { return a > b ? a : b; }

class Fuser {
 public:
  Fuser(Graph& graph, int max_fuse_depth) : max_depth_(max_fuse_depth) {
    BuildForwardGraph(graph);
    BuildPostDominatorTree();
    groups_.resize(fwd_.size());
    for (size_t i = 0; i < fwd_.size(); ++i) groups_[i].pattern = fwd_[i].pattern;
  }

  // Returns whether any two ops now share a group.
  bool Run() {
    bool fused = false;
    for (int nid = 0; nid < static_cast<int>(fwd_.size()); ++nid) fused |= VisitReduction(nid);
    for (int phase = 0; phase < 3; ++phase) {
      for (int nid = 0; nid < static_cast<int>(fwd_.size()); ++nid) {
        fused |= VisitNode(nid, phase);
      }
    }
    for (size_t i = 0; i < fwd_.size(); ++i) {
      fwd_[i].node->group_root = nullptr;
    }
    // The group's root is its last node in post-DFS order (it post-dominates the rest).
    std::unordered_map<int, int> last;
    for (int i = 0; i < static_cast<int>(fwd_.size()); ++i) last[Find(i)] = i;
    for (int i = 0; i < static_cast<int>(fwd_.size()); ++i) {
      int root = last[Find(i)];
      if (root != i) fwd_[i].node->group_root = fwd_[root].node;
    }
    return fused;
  }

 private:
  void BuildForwardGraph(Graph& graph) {
    std::unordered_map<const Node*, int> index;
    for (Node* n : graph.TopologicalOrder()) {
      if (!n->is_op()) continue;
      index[n] = static_cast<int>(fwd_.size());
      fwd_.push_back({n, n->op->pattern, false, {}});
    }
    for (Node* out : graph.outputs()) {
      auto it = index.find(out);
      if (it != index.end()) fwd_[it->second].extern_ref = true;
    }
    for (int i = 0; i < static_cast<int>(fwd_.size()); ++i) {
      Node* n = fwd_[i].node;
      std::unordered_set<const Node*> seen;
      for (Node* in : n->inputs) {
        auto it = index.find(in);
        if (it == index.end() || !seen.insert(in).second) continue;
        OpPattern edge = fwd_[i].pattern;
        if (edge == OpPattern::kBroadcast && in->type.shape == n->type.shape) {
          edge = OpPattern::kElemWise;
        }
        fwd_[it->second].outputs.push_back({i, edge});
      }
    }
  }

  int Lca(int a, int b, OpPattern& pattern) {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      if (dom_[a].depth < dom_[b].depth) {
        pattern = CombinePattern(pattern, dom_[b].pattern);
        b = dom_[b].parent;
      } else if (dom_[b].depth < dom_[a].depth) {
        pattern = CombinePattern(pattern, dom_[a].pattern);
        a = dom_[a].parent;
      } else {
        pattern = CombinePattern(pattern, dom_[a].pattern);
        pattern = CombinePattern(pattern, dom_[b].pattern);
        a = dom_[a].parent;
        b = dom_[b].parent;
      }
    }
    return a;
  }

  void BuildPostDominatorTree() {
    dom_.resize(fwd_.size());
    for (int i = static_cast<int>(fwd_.size()) - 1; i >= 0; --i) {
      DomNode& d = dom_[i];
      const ForwardNode& f = fwd_[i];
      if (f.extern_ref || f.outputs.empty()) {
        d.parent = -1;
        d.depth = 1;
        d.pattern = OpPattern::kOpaque;
        continue;
      }
      OpPattern pattern = OpPattern::kElemWise;
      int parent = f.outputs[0].node;
      pattern = CombinePattern(pattern, f.outputs[0].pattern);
      for (size_t k = 1; k < f.outputs.size() && parent >= 0; ++k) {
        pattern = CombinePattern(pattern, f.outputs[k].pattern);
        parent = Lca(parent, f.outputs[k].node, pattern);
      }
      d.parent = parent;
      d.depth = parent >= 0 ? dom_[parent].depth + 1 : 1;
      d.pattern = pattern;
    }
  }

  int Find(int i) {
    while (groups_[i].parent >= 0) {
      if (groups_[groups_[i].parent].parent >= 0) groups_[i].parent = groups_[groups_[i].parent].parent;
      i = groups_[i].parent;
    }
    return i;
  }

  template <typename Cond>
  bool CheckPathRec(int src, int sink, const Cond& cond, std::unordered_set<int>& visited) {
    if (!visited.insert(src).second) return true;
    const OpPattern pattern = groups_[Find(src)].pattern;
    if (src == sink || Find(src) == Find(sink)) return cond(pattern, true);
    if (!cond(pattern, false)) return false;
    for (const Edge& e : fwd_[src].outputs) {
      if (!CheckPathRec(e.node, sink, cond, visited)) return false;
    }
    return true;
  }

  // Every path from src (exclusive) to sink satisfies `cond`.
  template <typename Cond>
  bool CheckPath(int src, int sink, const Cond& cond) {
    std::unordered_set<int> visited;
    for (const Edge& e : fwd_[src].outputs) {
      if (!CheckPathRec(e.node, sink, cond, visited)) return false;
    }
    return true;
  }

  void MergeInto(int child, int target_root) {
    int c = Find(child);
    if (c == target_root) return;
    groups_[target_root].num_nodes += groups_[c].num_nodes;
    groups_[target_root].pattern = CombinePattern(groups_[c].pattern, groups_[target_root].pattern);
    groups_[c].parent = target_root;
  }

  void CommitFuseRec(int src, int sink, int target, std::unordered_set<int>& visited) {
    if (src == sink || !visited.insert(src).second) return;
    MergeInto(src, target);
    for (const Edge& e : fwd_[src].outputs) CommitFuseRec(e.node, sink, target, visited);
  }

  void CommitFuse(int src, int sink) {
    std::unordered_set<int> visited;
    CommitFuseRec(src, sink, Find(sink), visited);
  }

  // Ops in the merged group if src's paths to sink joined sink's group.
  int CountFusedNodes(int src, int sink) {
    std::unordered_set<int> visited;
    std::unordered_set<int> roots;
    std::vector<int> stack{src};
    const int sink_root = Find(sink);
    int count = groups_[sink_root].num_nodes;
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (n == sink || !visited.insert(n).second) continue;
      int r = Find(n);
      if (r != sink_root && roots.insert(r).second) count += groups_[r].num_nodes;
      for (const Edge& e : fwd_[n].outputs) stack.push_back(e.node);
    }
    return count;
  }

  // Kiln's extra phase: a reduction into its elementwise epilogue.
  bool VisitReduction(int nid) {
    const int root = Find(nid);
    if (groups_[root].pattern != OpPattern::kCommReduce) return false;
    const DomNode& dom = dom_[nid];
    if (dom.parent >= 0 && dom.pattern == OpPattern::kCommReduce) return FuseRowPair(nid);
    if (dom.parent < 0 || dom.pattern > OpPattern::kBroadcast) return false;
    const int sink = dom.parent;
    if (Find(sink) == root || CountFusedNodes(nid, sink) > max_depth_) return false;
    auto cond = [](OpPattern kind, bool) { return kind <= OpPattern::kBroadcast; };
    if (!CheckPath(nid, sink, cond)) return false;
    CommitFuse(nid, sink);
    return true;
  }

  bool VisitNode(int nid, int phase) {
    const int root = Find(nid);
    const OpPattern group_pattern = groups_[root].pattern;
    if (group_pattern == OpPattern::kOpaque) return false;
    const DomNode& dom = dom_[nid];
    if (dom.parent < 0) return false;
    const int sink = dom.parent;
    if (Find(sink) == root) return false;
    if (phase == 2) return false;  // no tuples yet: nothing to fuse into them
    if (groups_[Find(sink)].pattern == OpPattern::kTuple) return false;
    if (CountFusedNodes(nid, sink) > max_depth_) return false;

    if (group_pattern == OpPattern::kOutEWiseFusable) {
      if (phase != 0 || dom.pattern != OpPattern::kElemWise) return false;
      auto cond = [](OpPattern kind, bool) { return kind <= OpPattern::kBroadcast; };
      if (!CheckPath(nid, sink, cond)) return false;
      CommitFuse(nid, sink);
      return true;
    }
    if (group_pattern <= OpPattern::kBroadcast) {
      if (phase != 0) return false;
      if (!(dom.pattern <= OpPattern::kInjective || dom.pattern == OpPattern::kCommReduce)) {
        return false;
      }
      auto cond = [](OpPattern kind, bool is_sink) {
        if (!is_sink) return kind <= OpPattern::kBroadcast;
        return kind <= OpPattern::kBroadcast || kind == OpPattern::kCommReduce ||
               kind == OpPattern::kInjective || kind == OpPattern::kOutEWiseFusable;
      };
      if (!CheckPath(nid, sink, cond)) return false;
      CommitFuse(nid, sink);
      return true;
    }
    if (group_pattern == OpPattern::kInjective) {
      if (phase != 1) return false;
      auto cond = [](OpPattern kind, bool) { return kind <= OpPattern::kInjective; };
      if (CheckPath(nid, sink, cond)) {
        CommitFuse(nid, sink);
        return true;
      }
      return FuseIntoOperand(nid, sink);
    }
    return false;  // CommReduce and the rest are fusion sinks, never sources
  }

  // Kiln's other extra: an injective producer (a slice, reshape or transpose
  // chain, with any elementwise ops in it) whose every path ends in a dense
  // or matmul joins that op's group. The contraction schedule packs its
  // activation operand on every call anyway, so reading it through the
  // producer's index expression costs nothing extra, and the copy kernel and
  // its tensor disappear: attention's head split and merge in the
  // transformer. conv2d is left out: its schedule reads its input in place.
  bool FuseIntoOperand(int nid, int sink) {
    const Node* op = fwd_[sink].node;
    if (op->op->name != "dense" && op->op->name != "matmul") return false;
    auto cond = [](OpPattern kind, bool is_sink) {
      return is_sink ? kind == OpPattern::kOutEWiseFusable : kind <= OpPattern::kInjective;
    };
    if (!CheckPath(nid, sink, cond)) return false;
    CommitFuse(nid, sink);
    return true;
  }

  // What a row reduction reduces: the shape of its input and the reduced
  // axes (non-negative, sorted; every axis when none are named).
  struct RowKey {
    std::vector<int64_t> shape;
    std::vector<int64_t> axes;
    bool operator==(const RowKey& o) const { return shape == o.shape && axes == o.axes; }
  };

  // The RowKey of a reduce op (sum, mean, max, ...), nullopt for any other op.
  static std::optional<RowKey> RowKeyOf(const Node* n) {
    const auto* attrs = std::get_if<ReduceAttrs>(&n->attrs);
    if (n->op->pattern != OpPattern::kCommReduce || attrs == nullptr) return std::nullopt;
    RowKey key{n->inputs[0]->type.shape, {}};
    const int64_t rank = static_cast<int64_t>(key.shape.size());
    for (int64_t a : attrs->axes) key.axes.push_back(a < 0 ? a + rank : a);
    if (attrs->axes.empty()) {
      for (int64_t d = 0; d < rank; ++d) key.axes.push_back(d);
    }
    std::sort(key.axes.begin(), key.axes.end());
    return key;
  }

  // Whether every op of `root`'s group is elementwise or broadcast, or a
  // reduction of `key` (the first one met sets `key`).
  bool GroupReducesRow(int root, std::optional<RowKey>& key) {
    auto fits = [&](const Node* n) {
      if (n->op->pattern <= OpPattern::kBroadcast) return true;
      std::optional<RowKey> k = RowKeyOf(n);
      if (!k) return false;
      if (!key) key = k;
      return *key == *k;
    };
    if (groups_[root].num_nodes == 1) return fits(fwd_[root].node);
    for (int i = 0; i < static_cast<int>(fwd_.size()); ++i) {
      if (Find(i) == root && !fits(fwd_[i].node)) return false;
    }
    return true;
  }

  // Kiln's row pair: a reduction group into its ipdom across other
  // reductions of the same row (design note), when the source's output is a
  // whole row tensor (what the second reduction reads, or an elementwise
  // function of it) and every group on the way, the sink's too, holds only
  // elementwise or broadcast ops and reductions of that row.
  bool FuseRowPair(int nid) {
    const int root = Find(nid);
    const int sink = dom_[nid].parent;
    const int sink_root = Find(sink);
    if (sink_root == root || CountFusedNodes(nid, sink) > max_depth_) return false;
    std::optional<RowKey> key;
    if (!GroupReducesRow(root, key) || !key || fwd_[nid].node->type.shape != key->shape ||
        !GroupReducesRow(sink_root, key)) {
      return false;
    }
    std::unordered_set<int> seen_groups{root, sink_root}, seen_nodes;
    std::vector<int> stack;
    for (const Edge& e : fwd_[nid].outputs) stack.push_back(e.node);
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      const int r = Find(n);
      // Every path ends in the sink's group (it post-dominates nid).
      if (r == sink_root || !seen_nodes.insert(n).second) continue;
      if (seen_groups.insert(r).second && !GroupReducesRow(r, key)) return false;
      for (const Edge& e : fwd_[n].outputs) stack.push_back(e.node);
    }
    CommitFuse(nid, sink);
    return true;
  }

  int max_depth_;
  std::vector<ForwardNode> fwd_;
  std::vector<DomNode> dom_;
  std::vector<Group> groups_;
};

absl::StatusOr<bool> FuseOps(Graph& graph, const PassContext& ctx) {
  Fuser fuser(graph, std::max(1, ctx.config.fuse_max_depth));
  return fuser.Run();
}

}  // namespace

std::unique_ptr<Pass> CreateFuseOpsPass() {
  return std::make_unique<FunctionPass>(PassInfo{"FuseOps", 1, {"InferType"}}, FuseOps);
}

}  // namespace kiln
