// Small helpers for building IR graphs in tests.
#ifndef KILN_TESTS_TEST_UTIL_GRAPH_BUILDING_H_
#define KILN_TESTS_TEST_UTIL_GRAPH_BUILDING_H_

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/op_registry.h"

namespace kiln::testing {

inline std::shared_ptr<ConstantData> FloatConstant(std::vector<int64_t> shape, float fill) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, std::move(shape)};
  std::vector<float> values(data->type.NumElements(), fill);
  data->bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return data;
}

inline std::shared_ptr<ConstantData> FloatValues(std::vector<int64_t> shape,
                                                const std::vector<float>& values) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, std::move(shape)};
  data->bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return data;
}

inline std::shared_ptr<ConstantData> Int64Values(std::vector<int64_t> shape,
                                                const std::vector<int64_t>& values) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kInt64, std::move(shape)};
  data->bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * 8);
  return data;
}

// Adds op `op` (which must be registered) reading `inputs`. Node names are
// numbered process-wide; atomically, as tests build graphs on several threads.
inline Node* Op(Graph& g, const std::string& op, std::vector<Node*> inputs,
                Attrs attrs = NoAttrs{}) {
  static std::atomic<int> counter{0};
  return g.AddOp(op + "_" + std::to_string(counter++), OpRegistry::Default().Find(op),
                 std::move(inputs), std::move(attrs));
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_GRAPH_BUILDING_H_
