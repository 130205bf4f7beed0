// An ONNX model whose weights are kept as external data, for the tests of
// repository models that have some (model_repository_test, model_store_test).
#ifndef KILN_TESTS_SERVER_EXTERNAL_DATA_MODEL_H_
#define KILN_TESTS_SERVER_EXTERNAL_DATA_MODEL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::testing {

// x [2, 3] @ w [3, 2] + b [2], w and b kept in `weights` (w's 24 bytes, then
// b's 8) as ONNX external data at `location`.
inline std::string ExternalDataModel(const std::string& location) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("affine");
  onnx::NodeProto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("w");
  mm->add_output("xw");
  onnx::NodeProto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("xw");
  add->add_input("b");
  add->add_output("y");
  auto external = [&](const char* name, std::vector<int64_t> dims, int offset, int length) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location},
                               {"offset", std::to_string(offset)},
                               {"length", std::to_string(length)}}) {
      onnx::StringStringEntryProto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  };
  external("w", {3, 2}, 0, 24);
  external("b", {2}, 24, 8);
  auto value = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) {
      v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
  };
  value(g->add_input(), "x", {2, 3});
  value(g->add_output(), "y", {2, 2});
  return model.SerializeAsString();
}

// The bytes of `weights` for ExternalDataModel: w = [[1 2] [3 4] [5 6]],
// b = [0.5 -1]; for x = [[1 0 -1] [2 1 0]] the model answers
// [[-3.5 -5] [5.5 7]].
inline std::string ExternalDataWeights() {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {0.5f, -1};
  std::string weights(reinterpret_cast<const char*>(w.data()), 24);
  weights.append(reinterpret_cast<const char*>(b.data()), 8);
  return weights;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_EXTERNAL_DATA_MODEL_H_
