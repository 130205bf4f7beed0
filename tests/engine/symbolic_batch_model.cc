#include "tests/engine/symbolic_batch_model.h"

#include <vector>

#include "tests/test_util/graph_building.h"

namespace kiln::engine {

using ::kiln::testing::Op;

ModelSignature BatchModelSignature(bool two_inputs) {
  ModelSignature s;
  for (const char* name : two_inputs ? std::vector<const char*>{"a", "b"}
                                     : std::vector<const char*>{"x"}) {
    s.inputs.push_back({name, DType::kFloat32, {-1, kWidth}, {"batch", ""}});
  }
  s.outputs.push_back({"y", DType::kFloat32, {-1, kWidth}, {"batch", ""}});
  return s;
}

absl::StatusOr<Graph> BatchModelGraph(const ShapeBinding& shapes, std::atomic<int>* builds) {
  if (builds) ++*builds;
  // Two batches the "importer" refuses: for good, and for now.
  if (shapes.count("x") && shapes.at("x")[0] == 13) {
    return absl::InvalidArgumentError("batch 13 is not for this model");
  }
  if (shapes.count("x") && shapes.at("x")[0] == 17) {
    return absl::ResourceExhaustedError("no room for batch 17 right now");
  }
  Graph g;
  if (shapes.count("a")) {
    Node* a = g.AddInput("a", {DType::kFloat32, shapes.at("a")});
    Node* b = g.AddInput("b", {DType::kFloat32, shapes.at("b")});
    g.AddOutput(Op(g, "add", {Op(g, "relu", {a}), b}), "y");
    return g;
  }
  Node* x = g.AddInput("x", {DType::kFloat32, shapes.at("x")});
  Node* two = g.AddConstant("two", testing::FloatValues({}, {2.0f}));
  g.AddOutput(Op(g, "mul", {Op(g, "relu", {x}), two}), "y");
  return g;
}

}  // namespace kiln::engine
