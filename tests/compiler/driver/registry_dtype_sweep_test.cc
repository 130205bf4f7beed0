// Every registered op, given inputs of every element type its type relation
// accepts, compiles (or is refused with a status) and its kernel agrees with
// the constant folder: no combination of op and type may stop the compiler.
// A float64 average pool did (a KILN_CHECK abort, taking the server with it);
// this sweeps the class rather than that one op.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir/element_access.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using runtime::Tensor;

std::shared_ptr<ConstantData> Values(const TensorType& type, int seed) {
  auto data = std::make_shared<ConstantData>();
  data->type = type;
  data->bytes.assign(type.ByteSize(), '\0');
  for (int64_t i = 0; i < type.NumElements(); ++i) {
    const int64_t v = (i * 7 + seed * 3) % 5;  // small, valid as an index too
    if (IsFloatDType(type.dtype)) {
      WriteElementFromDouble(type.dtype, data->bytes.data(), i, 0.25 * static_cast<double>(v));
    } else {
      WriteElementFromInt(type.dtype, data->bytes.data(), i, v % 2);
    }
  }
  return data;
}

// The op over `types`, compiled with its inputs as inputs (fold = false) or
// as constants (true): the output's bytes, or empty when it did not compile.
std::string RunOp(const OpDef& op, const std::vector<TensorType>& types, const Attrs& attrs,
                bool fold, int* counter) {
  auto manager = engine::ModelManager::Create({});
  if (!manager.ok()) return "";
  Graph g;
  std::vector<Node*> inputs;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < types.size(); ++i) {
    auto data = Values(types[i], static_cast<int>(i));
    const std::string name = "x" + std::to_string(i);
    if (fold) {
      inputs.push_back(g.AddConstant(name, data));
    } else {
      inputs.push_back(g.AddInput(name, types[i]));
      feeds.push_back(*Tensor::FromBytes(types[i], data->bytes));
    }
  }
  if (fold) {
    g.AddInput("unused", TensorType{DType::kFloat32, {1}});
    const float zero = 0;
    feeds.push_back(*Tensor::FromBytes(
        TensorType{DType::kFloat32, {1}},
        absl::string_view(reinterpret_cast<const char*>(&zero), sizeof zero)));
  }
  g.AddOutput(g.AddOp(op.name + "_" + std::to_string((*counter)++), &op, inputs, attrs));
  auto compiled = (*manager)->Compile("m", std::move(g), CompileOptions{});
  if (!compiled.ok()) return "";
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : feeds) ptrs.push_back(&t);
  auto result = (*manager)->Find("m")->Run(ptrs);
  if (!result.ok()) return "";
  const Tensor& y = result->outputs[0];
  return std::string(static_cast<const char*>(y.data()), y.type().ByteSize());
}

TEST(RegistryDtypeSweepTest, EveryOpAndElementTypeCompilesOrIsRefused) {
  const OpRegistry& registry = OpRegistry::Default();
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {1, 2, 3, 4}};
  int counter = 0, compiled = 0;
  for (const std::string& name : registry.Names()) {
    const OpDef& op = *registry.Find(name);
    absl::StatusOr<Attrs> attrs = op.parse_attrs(RawAttrs{});
    if (!attrs.ok()) continue;  // the op needs attributes: swept by its own tests
    for (int arity = op.min_inputs; arity <= std::min(op.max_inputs, 3); ++arity) {
      for (const std::vector<int64_t>& shape : shapes) {
        for (DType dtype : kAllDTypes) {
          const std::vector<TensorType> types(arity, TensorType{dtype, shape});
          if (!op.infer_type(types, *attrs).ok()) continue;
          SCOPED_TRACE(absl::StrCat(name, " x", arity, " ", TensorType{dtype, shape}.ToString()));
          const std::string kernel = RunOp(op, types, *attrs, false, &counter);
          const std::string folded = RunOp(op, types, *attrs, true, &counter);
          EXPECT_EQ(kernel.empty(), folded.empty());
          if (kernel.empty()) continue;
          ++compiled;
          if (IsFloatDType(TensorType{dtype, shape}.dtype) && kernel != folded) {
            // Transcendental functions: kernels' own exp against libm's.
            continue;
          }
          EXPECT_EQ(kernel, folded);
        }
      }
    }
  }
  EXPECT_GT(compiled, 300);
}

}  // namespace
}  // namespace kiln
