#include "engine/row_chunks.h"

#include <unistd.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/passes/row_independence.h"

namespace kiln::engine {

namespace {

// This core's L2 (2 MB on the Xeon, 1 MB on Zen 5; 1 MB when the host does
// not say): a value larger goes through memory from one kernel to the next.
double CacheBytes() {
  static const double bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? static_cast<double>(l2) : double{1 << 20};
  }();
  return bytes;
}
// Uses of each weight per slice below which a kernel is weight-bound: a
// matrix-vector product (one row of a dense layer) reads each weight once.
constexpr double kWeightReuse = 16;

// One kernel of the one-row program.
struct KernelBytes {
  // Its largest constant operand when it reads it whole (a contraction:
  // each weight in at least one multiply-add); 0 for none, and for a
  // gather, which reads the rows it is asked for, as many a slice as whole.
  double weights = 0;
  double output = 0;  // what it writes
  double reuse = 0;   // multiply-adds per weight
};

KernelBytes Measure(const Program& p, const KernelCall& k) {
  KernelBytes b;
  double weight_elements = 0;
  for (size_t a = 0; a + 1 < k.args.size(); ++a) {
    const ValueSpec& v = p.values[k.args[a]];
    if (v.kind != ValueSpec::Kind::kConstant) continue;
    if (static_cast<double>(v.type.ByteSize()) > b.weights) {
      b.weights = static_cast<double>(v.type.ByteSize());
      weight_elements = static_cast<double>(v.type.NumElements());
    }
  }
  b.output = static_cast<double>(p.values[k.args.back()].type.ByteSize());
  if (weight_elements > 0) b.reuse = k.flops / (2 * weight_elements);
  // y[M, N] = x[M, K] w[K, N]: 2 M K N flops over K N weights, reuse M:
  // 1 for one row of a dense layer, the output pixels for a conv.
  if (b.reuse < 1) b.weights = 0;
  return b;
}

// Whether one row's share of some value fits in cache where the whole
// batch's does not: without one, no kernel of any fusion can gain from
// slices (ChunkRowsFor would keep the batch whole), so the one-row model
// need not be compiled to ask.
bool SomeValueOutgrowsTheCache(const Graph& whole, int64_t rows) {
  for (const Node* n : whole.AllNodes()) {
    if (!n->is_op() || !n->type_known) continue;
    const double bytes = static_cast<double>(n->type.ByteSize());
    if (bytes > CacheBytes() && bytes / rows <= CacheBytes()) return true;
  }
  return false;
}

// `whole` with its value `cut` as an input (named `cut`'s name) and what
// only led to it gone: the tail, run on the whole batch. The graph's own
// inputs stay, unread.
Graph TailGraph(const Graph& whole, const Node* cut) {
  Graph tail = whole.Clone();
  Node* from = nullptr;
  for (Node* n : tail.AllNodes()) {
    if (n->id == cut->id) from = n;  // a clone keeps every node's place
  }
  Node* input = tail.AddInput(cut->name + ".rows", cut->type);
  tail.ReplaceAllUses(from, input);
  tail.RemoveDeadNodes();
  return tail;
}

// The ordinal of `n` among the ops named like it, in topological order.
int OpOrdinal(const Graph& g, const Node* n) {
  int ordinal = 0;
  for (const Node* m : g.TopologicalOrder()) {
    if (m == n) return ordinal;
    ordinal += m->is_op() && m->op == n->op;
  }
  return -1;
}

// A batch of `rows` up to `cut` of `whole`: the slices' graph, the cut its
// one output. The cut is found in the graph of the slices' batch by name
// (an importer names nodes alike at any batch), else as the op of its kind
// at the same place in topological order.
absl::StatusOr<Graph> HeadGraph(Graph sliced, const Graph& whole, const Node* cut) {
  Node* found = nullptr;
  for (Node* n : sliced.AllNodes()) {
    if (n->name == cut->name) found = n;
  }
  if (found == nullptr) {
    const int ordinal = OpOrdinal(whole, cut);
    int seen = 0;
    for (Node* n : sliced.TopologicalOrder()) {
      if (!n->is_op() || n->op != cut->op) continue;
      if (seen++ == ordinal) found = n;
    }
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("no node '", cut->name, "' in the sliced graph"));
  }
  sliced.SetOutput(0, found);
  sliced.RemoveDeadNodes();
  return sliced;
}

}  // namespace

const Node* WholeBatchTailCut(const Graph& whole, int64_t rows) {
  if (whole.outputs().size() != 1 || rows < 2) return nullptr;
  const Node* out = whole.outputs()[0];
  const std::vector<Node*> order = whole.TopologicalOrder();
  std::unordered_map<const Node*, std::vector<const Node*>> consumers;
  for (const Node* n : order) {
    for (const Node* in : n->inputs) consumers[in].push_back(n);
  }
  auto fits = [&](const Node* n) {
    return n->is_op() && n->type_known && !n->type.shape.empty() && n->type.shape[0] == rows &&
           static_cast<double>(n->type.ByteSize()) <= CacheBytes() / 2;
  };
  // Earliest first: the first cut that works has the largest tail.
  for (const Node* cut : order) {
    if (cut == out || !fits(cut)) continue;
    std::unordered_set<const Node*> tail;
    std::vector<const Node*> stack{cut};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const Node* c : consumers[n]) {
        if (tail.insert(c).second) stack.push_back(c);
      }
    }
    if (!tail.count(out)) continue;
    bool whole_batch = true;
    int64_t weights = 0;
    for (const Node* n : tail) {
      whole_batch &= fits(n);
      for (const Node* in : n->inputs) {
        if (in->is_constant()) {
          weights = std::max<int64_t>(weights, in->type.ByteSize());
        } else {
          whole_batch &= in == cut || tail.count(in) > 0;
        }
      }
    }
    if (whole_batch && weights >= kTailWeightBytes) return cut;
  }
  return nullptr;
}

int64_t ChunkRowsFor(const Program& one_row, int64_t rows) {
  std::vector<KernelBytes> kernels;
  for (const KernelCall& k : one_row.kernels) kernels.push_back(Measure(one_row, k));
  // Past the rows at which no kernel's output fits in cache, slices save
  // nothing: the search stops there, however large the batch (a fixed
  // batch of 2^40 rows would otherwise be counted through).
  double smallest_output = CacheBytes() + 1;
  for (const KernelBytes& b : kernels) {
    if (b.output > 0) smallest_output = std::min(smallest_output, b.output);
  }
  const int64_t largest_useful = static_cast<int64_t>(CacheBytes() / smallest_output);
  for (int64_t chunk = 1; chunk < rows && chunk <= largest_useful; ++chunk) {
    if (rows % chunk != 0) continue;
    // Slices stream a weight once each where the whole batch's kernel used
    // it for every row from registers or cache: (slices - 1) more reads of
    // it, where a slice's rows use it fewer than kWeightReuse times.
    // Against that, every intermediate a slice keeps in cache that the
    // whole batch wrote and read back through memory.
    double weight_penalty = 0, activations_saved = 0;
    for (const KernelBytes& b : kernels) {
      if (b.weights > 0 && b.reuse * chunk < kWeightReuse) {
        weight_penalty += (rows / chunk - 1) * b.weights;
      }
      if (b.output * rows > CacheBytes() && b.output * chunk <= CacheBytes()) {
        activations_saved += 2 * b.output * rows;
      }
    }
    if (weight_penalty < activations_saved) return chunk;
  }
  return rows;
}

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> RowChunkedModel(
    const Graph& whole, int64_t rows, RowChunkSetting setting, const ModelForRows& model_for,
    RowChunkReport* report, const TailCompiler* tail) {
  RowChunkReport unread;
  RowChunkReport& said = report != nullptr ? *report : unread;
  auto whole_because = [&](std::string why) {
    said.why_whole = std::move(why);
    return nullptr;
  };
  if (setting.rows == RowChunkSetting::kOff) return whole_because("row chunks are off");
  if (rows < 2) return whole_because("a batch of one row");
  if (setting.rows > 0 && (setting.rows >= rows || rows % setting.rows != 0)) {
    return whole_because(absl::StrCat(setting.rows, " rows do not divide ", rows, " in parts"));
  }
  if (absl::Status s = CheckRowsIndependent(whole, rows); !s.ok()) {
    return whole_because(std::string(s.message()));
  }
  const bool automatic = setting.rows == RowChunkSetting::kAuto;
  if (automatic && !SomeValueOutgrowsTheCache(whole, rows)) {
    return whole_because("every value of the whole batch fits in cache");
  }
  const Node* cut = tail != nullptr && tail->graph_for && tail->compile
                        ? WholeBatchTailCut(whole, rows)
                        : nullptr;
  // The slices stop at the cut: a model of their own, the graph at their
  // rows up to it (its kernels, but the cut's, are the sliced variant's,
  // found in the kernel cache). A head or tail that does not compile
  // leaves the slices whole-graph, and the report says why.
  auto head_for =
      [&](int64_t slice_rows) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
    KILN_ASSIGN_OR_RETURN(Graph sliced, tail->graph_for(slice_rows));
    KILN_ASSIGN_OR_RETURN(Graph head, HeadGraph(std::move(sliced), whole, cut));
    return tail->compile(std::move(head), "head");
  };
  auto without_tail = [&](const absl::Status& why) {
    said.why_no_tail = absl::StrCat("no whole-batch tail after '", cut->name, "': ", why.message());
    cut = nullptr;
  };
  int64_t chunk = setting.rows;
  std::shared_ptr<runtime::CompiledModel> part;
  if (automatic) {
    // The rule weighs what the slices would run: with a cut, the head
    // alone, since the tail streams its weights once for the whole batch.
    if (cut != nullptr) {
      absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> head = head_for(1);
      if (head.ok()) {
        part = *std::move(head);
      } else {
        without_tail(head.status());
      }
    }
    if (part == nullptr) {
      KILN_ASSIGN_OR_RETURN(part, model_for(1));
    }
    chunk = ChunkRowsFor(part->program(), rows);
    if (chunk >= rows || chunk < 1 || rows % chunk != 0) {
      return whole_because(
          "slices would stream the weights again for more than the cache they keep saves");
    }
    if (chunk != 1) part.reset();
  }
  std::shared_ptr<runtime::CompiledModel> tail_model;
  if (cut != nullptr) {
    absl::Status split = [&]() -> absl::Status {
      if (part == nullptr) {
        KILN_ASSIGN_OR_RETURN(part, head_for(chunk));
      }
      KILN_ASSIGN_OR_RETURN(tail_model, tail->compile(TailGraph(whole, cut), "tail"));
      return absl::OkStatus();
    }();
    if (!split.ok()) {
      without_tail(split);
      part.reset();
      tail_model.reset();
    }
  }
  if (part == nullptr) {
    KILN_ASSIGN_OR_RETURN(part, model_for(chunk));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CompiledModel> chunked,
                        runtime::CompiledModel::CreateRowChunked(std::move(part), rows / chunk,
                                                                 std::move(tail_model)));
  return std::shared_ptr<runtime::CompiledModel>(std::move(chunked));
}

}  // namespace kiln::engine
