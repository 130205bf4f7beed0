#include "compiler/passes/fold_scale_axis.h"

#include <optional>
#include <unordered_map>

#include "compiler/ir/op_def.h"

namespace kiln {
namespace {

// The producer's output-channel axis and count, for conv2d (NCHW: axis 1) and
// dense/matmul (last axis); nullopt for anything else.
std::optional<std::pair<int64_t, int64_t>> ChannelAxis(const Node& n) {
  if (!n.is_op()) return std::nullopt;
  const std::string& op = n.op->name;
  if (op == "conv2d") return std::make_pair(int64_t{1}, n.type.shape[1]);
  if (op == "dense" || op == "matmul") {
    return std::make_pair(n.type.rank() - 1, n.type.shape.back());
  }
  return std::nullopt;
}

// Per-channel values of `c` if its shape broadcasts against the producer's
// output only along `axis` (or it is a single value); nullopt otherwise.
std::optional<std::vector<float>> PerChannel(const Node& c, int64_t axis, int64_t out_rank,
                                             int64_t channels) {
  if (!c.is_constant() || c.type.dtype != DType::kFloat32) return std::nullopt;
  const std::vector<int64_t>& s = c.type.shape;
  if (static_cast<int64_t>(s.size()) > out_rank) return std::nullopt;
  const float* v = c.value->data<float>();
  if (c.type.NumElements() == 1) return std::vector<float>(channels, v[0]);
  const int64_t offset = out_rank - static_cast<int64_t>(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    const int64_t out_dim = offset + static_cast<int64_t>(d);
    const int64_t want = out_dim == axis ? channels : 1;
    if (s[d] != want) return std::nullopt;
  }
  return std::vector<float>(v, v + channels);
}

std::shared_ptr<ConstantData> Scaled(const ConstantData& w, bool rows_are_channels,
                                     const std::vector<float>& scale) {
  auto out = std::make_shared<ConstantData>(w);
  float* data = reinterpret_cast<float*>(out->bytes.data());
  const int64_t n = w.type.NumElements();
  const int64_t channels = static_cast<int64_t>(scale.size());
  if (rows_are_channels) {  // OIHW / (N, K): channel-major
    const int64_t inner = n / channels;
    for (int64_t i = 0; i < n; ++i) data[i] *= scale[i / inner];
  } else {  // matmul's (K, N): channel is the column
    for (int64_t i = 0; i < n; ++i) data[i] *= scale[i % channels];
  }
  return out;
}

class ScaleFolder {
 public:
  explicit ScaleFolder(Graph& graph) : graph_(graph) {
    for (Node* n : graph.TopologicalOrder()) {
      for (Node* in : n->inputs) ++uses_[in];
    }
    for (Node* out : graph.outputs()) ++uses_[out];
  }

  bool Run() {
    bool changed = false;
    for (Node* n : graph_.TopologicalOrder()) {
      if (!n->is_op() || n->inputs.size() != 2) continue;
      const std::string& op = n->op->name;
      if (op != "mul" && op != "add") continue;
      for (int side = 0; side < 2; ++side) {
        Node* producer = n->inputs[side];
        Node* constant = n->inputs[1 - side];
        if (TryFold(n, producer, constant, op == "mul")) {
          changed = true;
          break;
        }
      }
    }
    if (changed) graph_.RemoveDeadNodes();
    return changed;
  }

 private:
  bool TryFold(Node* n, Node* producer, Node* constant, bool is_scale) {
    auto axis = ChannelAxis(*producer);
    if (!axis || uses_[producer] != 1 || producer->type != n->type) return false;
    Node* weight = producer->inputs[1];
    if (!weight->is_constant()) return false;
    Node* bias = producer->inputs.size() == 3 ? producer->inputs[2] : nullptr;
    if (bias && !bias->is_constant()) return false;
    auto values = PerChannel(*constant, axis->first, n->type.rank(), axis->second);
    if (!values) return false;

    std::vector<Node*> inputs{producer->inputs[0], weight};
    const bool rows = producer->op->name != "matmul";
    if (is_scale) {
      inputs[1] = graph_.AddConstant(weight->name + "/scaled",
                                     Scaled(*weight->value, rows, *values));
      if (bias) {
        inputs.push_back(graph_.AddConstant(bias->name + "/scaled",
                                            Scaled(*bias->value, true, *values)));
      }
    } else {
      auto new_bias = std::make_shared<ConstantData>();
      new_bias->type = TensorType{DType::kFloat32, {axis->second}};
      new_bias->bytes.assign(reinterpret_cast<const char*>(values->data()), values->size() * 4);
      float* b = reinterpret_cast<float*>(new_bias->bytes.data());
      if (bias) {
        for (int64_t i = 0; i < axis->second; ++i) b[i] += bias->value->data<float>()[i];
      }
      inputs.push_back(graph_.AddConstant(producer->name + "/bias", std::move(new_bias)));
    }
    Node* folded = graph_.AddOp(producer->name, producer->op, inputs, producer->attrs);
    folded->type = producer->type;
    folded->type_known = true;
    graph_.ReplaceAllUses(n, folded);
    uses_[folded] = uses_[n];
    return true;
  }

  Graph& graph_;
  std::unordered_map<Node*, int> uses_;
};

absl::StatusOr<bool> FoldScaleAxis(Graph& graph, const PassContext&) {
  return ScaleFolder(graph).Run();
}

}  // namespace

std::unique_ptr<Pass> CreateFoldScaleAxisPass() {
  return std::make_unique<FunctionPass>(PassInfo{"FoldScaleAxis", 3, {"InferType"}},
                                        FoldScaleAxis);
}

}  // namespace kiln
