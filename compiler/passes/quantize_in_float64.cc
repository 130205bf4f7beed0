// QuantizeInFloat64, for each round(div(y, s)) of float32 with s a float
// constant:
//   1. Widen y: rebuild its ops in float64 down to its leaves (the header
//      says which), memoised per chain so a shared operand is rebuilt once;
//      a leaf becomes cast<f64>(leaf), a constant a float64 constant of its
//      values. Any other node stops the chain, which then keeps float32.
//   2. round(y64 / s64), cast to float32, replaces the round: an integer
//      (or NaN or infinite, as before), exact in float32, so the chain's
//      add of the zero point and clip read the same kind of value.
// The float32 ops left without readers are removed; those with other
// readers stay. Float64 costs each chain's kernel half its vector width:
// the model zoo's qdq_resnet18 has 8 residual adds and a pool of this kind.
#include "compiler/passes/quantize_in_float64.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "common/status_macros.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/integral_values.h"
#include "compiler/passes/qdq_operands.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 8;
constexpr int kMaxNodes = 64;  // per chain: a dequantise-add-requantise chain has ~12

bool IsRebuilt(const Node* n) {
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum", "neg", "relu", "clip", "sum",
                         "reshape", "where"}) {
    if (IsOp(n, op)) return true;
  }
  return false;
}

class Widener {
 public:
  explicit Widener(Graph& graph) : graph_(graph), ops_(OpRegistry::Default()) {}

  // `n` in float64, or null when its chain holds a node that is no leaf and
  // not rebuilt.
  Node* Widen(Node* n) {
    if (auto it = wide_.find(n); it != wide_.end()) return it->second;
    if (++visited_ > kMaxNodes || n->type.dtype != DType::kFloat32) return nullptr;
    Node* out = nullptr;
    if (n->is_constant()) {
      std::vector<double> values(n->type.NumElements());
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] =
            ReadElementAsDouble(n->type.dtype, n->value->bytes.data(), static_cast<int64_t>(i));
      }
      out = graph_.AddConstant(n->name + "/f64",
                               MakeConstant(DType::kFloat64, n->type.shape, values));
    } else if (IsRebuilt(n)) {
      std::vector<Node*> inputs;
      for (Node* in : n->inputs) {
        if (in->type.dtype == DType::kBool || in->type.dtype == DType::kInt64) {
          inputs.push_back(in);  // where's condition, reshape's shape: as they are
          continue;
        }
        Node* w = Widen(in);
        if (w == nullptr) return nullptr;
        inputs.push_back(w);
      }
      out = graph_.AddOp(n->name + "/f64", n->op, inputs, n->attrs);
    } else if (n->is_input() || IsIntegral(n, kMaxDepth)) {
      out = graph_.AddOp(n->name + "/f64", ops_.Find("cast"), {n}, CastAttrs{DType::kFloat64});
    }
    if (out != nullptr) wide_[n] = out;
    return out;
  }

 private:
  Graph& graph_;
  const OpRegistry& ops_;
  std::unordered_map<const Node*, Node*> wide_;
  int visited_ = 0;
};

absl::StatusOr<bool> QuantizeInFloat64(Graph& graph, const PassContext&) {
  const OpRegistry& ops = OpRegistry::Default();
  bool changed = false;
  for (Node* round : graph.TopologicalOrder()) {
    if (!IsOp(round, "round") || round->type.dtype != DType::kFloat32) continue;
    Node* div = round->inputs[0];
    if (!IsOp(div, "div") || !div->inputs[1]->is_constant()) continue;
    Widener widener(graph);
    Node* y = widener.Widen(div->inputs[0]);
    Node* s = y == nullptr ? nullptr : widener.Widen(div->inputs[1]);
    if (s == nullptr) continue;  // the nodes made so far have no readers
    const std::string& name = round->name;
    Node* q = graph.AddOp(name + "/f64_div", ops.Find("div"), {y, s}, NoAttrs{});
    q = graph.AddOp(name + "/f64", ops.Find("round"), {q}, NoAttrs{});
    graph.ReplaceAllUses(
        round, graph.AddOp(name + "/f32", ops.Find("cast"), {q}, CastAttrs{DType::kFloat32}));
    changed = true;
  }
  graph.RemoveDeadNodes();
  if (!changed) return false;
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

}  // namespace

std::unique_ptr<Pass> CreateQuantizeInFloat64Pass() {
  return std::make_unique<FunctionPass>(PassInfo{"QuantizeInFloat64", 2, {"InferType"}},
                                        QuantizeInFloat64);
}

}  // namespace kiln
