// Kiln's in-memory graph IR: a dataflow graph of single-output nodes.
//
// A Node is a graph input, a constant or an op application. Nodes are owned by
// the Graph; edges are raw pointers from a node to the nodes it reads. Passes
// rewrite by adding nodes and redirecting uses (ReplaceAllUses); nodes nobody
// reads any more are dropped by RemoveDeadNodes. The verifier (verifier.h)
// states the invariants every pass must keep.
#ifndef KILN_COMPILER_IR_GRAPH_H_
#define KILN_COMPILER_IR_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/attrs.h"
#include "compiler/ir/constant_bytes.h"
#include "compiler/ir/tensor_type.h"

namespace kiln {

struct OpDef;  // compiler/ir/op_def.h

enum class NodeKind { kInput, kConstant, kOp };

// The bytes of a constant, row-major little-endian; shared between graph copies.
struct ConstantData {
  TensorType type;
  ConstantBytes bytes;
  // The float64 values a float32 constant rounds, one per element, when the
  // frontend computed them exactly (a QDQ product's x_scale * w_scale and its
  // dequantised bias): passes that compute in float64 read them
  // (RequantizeInKernel). Not part of the constant's value: folding makes
  // constants without them, and hashing and equality ignore them.
  std::shared_ptr<const std::vector<double>> exact;

  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

struct Node {
  NodeKind kind = NodeKind::kOp;
  std::string name;
  // For kOp: the registered op. Null for inputs and constants.
  const OpDef* op = nullptr;
  std::vector<Node*> inputs;
  Attrs attrs;
  // Filled by InferType (inputs and constants carry theirs from the start).
  TensorType type;
  bool type_known = false;
  // For kConstant.
  std::shared_ptr<const ConstantData> value;
  // Set by FuseOps: the op whose value this node's fused group produces (the
  // group's root). Null means the node is a group of its own.
  Node* group_root = nullptr;

  bool is_op() const { return kind == NodeKind::kOp; }
  bool is_constant() const { return kind == NodeKind::kConstant; }
  bool is_input() const { return kind == NodeKind::kInput; }
  // The op's registered name, or "input" / "constant".
  const std::string& op_name() const;
  // Position in the graph's node list; stable while the node lives.
  int64_t id = 0;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  std::string name;

  Node* AddInput(std::string name, TensorType type);
  Node* AddConstant(std::string name, std::shared_ptr<const ConstantData> value);
  Node* AddOp(std::string name, const OpDef* op, std::vector<Node*> inputs, Attrs attrs);

  const std::vector<Node*>& inputs() const { return inputs_; }
  const std::vector<Node*>& outputs() const { return outputs_; }
  // The names outputs were declared with: they outlive rewrites of the nodes.
  const std::vector<std::string>& output_names() const { return output_names_; }
  void AddOutput(Node* node) { AddOutput(node, node->name); }
  // An output known by `name` (an importer's value name, not the node's).
  void AddOutput(Node* node, std::string name) {
    outputs_.push_back(node);
    output_names_.push_back(std::move(name));
  }
  void SetOutput(size_t i, Node* node) { outputs_[i] = node; }

  // Every node, in insertion order (not necessarily topological).
  std::vector<Node*> AllNodes() const;
  // The nodes reachable from the outputs, producers before consumers (post-DFS).
  // Graph inputs are included even when unused, first.
  std::vector<Node*> TopologicalOrder() const;
  // Makes every reader of `from` (and the outputs) read `to` instead.
  void ReplaceAllUses(Node* from, Node* to);
  // Drops op and constant nodes not reachable from the outputs; returns how many.
  int RemoveDeadNodes();
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size()); }

  // A deep copy of the structure (constant bytes are shared, being immutable).
  Graph Clone() const;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Node*> inputs_;
  std::vector<Node*> outputs_;
  std::vector<std::string> output_names_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_IR_GRAPH_H_
