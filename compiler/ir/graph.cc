#include "compiler/ir/graph.h"

#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/op_def.h"

namespace kiln {

const char* OpPatternName(OpPattern pattern) {
  switch (pattern) {
    case OpPattern::kElemWise:
      return "ElemWise";
    case OpPattern::kBroadcast:
      return "Broadcast";
    case OpPattern::kInjective:
      return "Injective";
    case OpPattern::kCommReduce:
      return "CommReduce";
    case OpPattern::kOutEWiseFusable:
      return "OutEWiseFusable";
    case OpPattern::kTuple:
      return "Tuple";
    case OpPattern::kOpaque:
      return "Opaque";
  }
  return "?";
}

const std::string& Node::op_name() const {
  static const std::string kInputName = "input";
  static const std::string kConstantName = "constant";
  switch (kind) {
    case NodeKind::kInput:
      return kInputName;
    case NodeKind::kConstant:
      return kConstantName;
    case NodeKind::kOp:
      break;
  }
  return op->name;
}

Node* Graph::AddInput(std::string node_name, TensorType type) {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kInput;
  node->name = std::move(node_name);
  node->type = std::move(type);
  node->type_known = true;
  node->id = static_cast<int64_t>(nodes_.size());
  inputs_.push_back(node.get());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* Graph::AddConstant(std::string node_name, std::shared_ptr<const ConstantData> value) {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kConstant;
  node->name = std::move(node_name);
  node->type = value->type;
  node->type_known = true;
  node->value = std::move(value);
  node->id = static_cast<int64_t>(nodes_.size());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* Graph::AddOp(std::string node_name, const OpDef* op, std::vector<Node*> inputs,
                   Attrs attrs) {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kOp;
  node->name = std::move(node_name);
  node->op = op;
  node->inputs = std::move(inputs);
  node->attrs = std::move(attrs);
  node->id = static_cast<int64_t>(nodes_.size());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

std::vector<Node*> Graph::AllNodes() const {
  std::vector<Node*> all;
  all.reserve(nodes_.size());
  for (const auto& n : nodes_) all.push_back(n.get());
  return all;
}

std::vector<Node*> Graph::TopologicalOrder() const {
  // Iterative post-order DFS: deep chains (thousands of ops) must not overflow the stack.
  std::vector<Node*> order;
  std::unordered_set<const Node*> done;
  for (Node* in : inputs_) {
    order.push_back(in);
    done.insert(in);
  }
  std::unordered_set<const Node*> on_stack;
  for (Node* out : outputs_) {
    if (done.count(out)) continue;
    std::vector<std::pair<Node*, size_t>> stack{{out, 0}};
    on_stack.insert(out);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        Node* in = node->inputs[next++];
        if (!done.count(in) && !on_stack.count(in)) {
          on_stack.insert(in);
          stack.push_back({in, 0});
        }
        continue;
      }
      done.insert(node);
      on_stack.erase(node);
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

void Graph::ReplaceAllUses(Node* from, Node* to) {
  for (auto& n : nodes_) {
    for (Node*& in : n->inputs) {
      if (in == from) in = to;
    }
  }
  for (Node*& out : outputs_) {
    if (out == from) out = to;
  }
}

int Graph::RemoveDeadNodes() {
  std::unordered_set<const Node*> live;
  for (Node* n : TopologicalOrder()) live.insert(n);
  std::vector<std::unique_ptr<Node>> kept;
  int removed = 0;
  for (auto& n : nodes_) {
    if (live.count(n.get()) || n->is_input()) {
      n->id = static_cast<int64_t>(kept.size());
      kept.push_back(std::move(n));
    } else {
      ++removed;
    }
  }
  nodes_ = std::move(kept);
  return removed;
}

Graph Graph::Clone() const {
  Graph copy;
  copy.name = name;
  std::unordered_map<const Node*, Node*> map;
  for (const auto& n : nodes_) {
    auto node = std::make_unique<Node>(*n);
    node->id = static_cast<int64_t>(copy.nodes_.size());
    map[n.get()] = node.get();
    copy.nodes_.push_back(std::move(node));
  }
  for (auto& n : copy.nodes_) {
    for (Node*& in : n->inputs) in = map.at(in);
    if (n->group_root) n->group_root = map.at(n->group_root);
  }
  for (Node* in : inputs_) copy.inputs_.push_back(map.at(in));
  for (Node* out : outputs_) copy.outputs_.push_back(map.at(out));
  copy.output_names_ = output_names_;
  return copy;
}

}  // namespace kiln
