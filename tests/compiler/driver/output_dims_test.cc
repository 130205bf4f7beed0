// Output dims of a symbolic Kiln graph, found by typing it at two sizes:
// the dims that follow a symbol are -1 and named after it; an output dim
// that is fixed, or follows no single symbol, is told apart.
#include "compiler/driver/output_dims.h"

#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/ops/op_registry.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// out1 = relu(x) @ w: [batch, 4]; out2 = x * x reshaped... kept simple:
// out2 = transpose(x): [3, batch]; out3 = concat(x, y) on axis 0: [batch + rows, 3].
constexpr char kGraph[] = R"pb(
  inputs { name: "x" dtype: FLOAT32 dims: -1 dims: 3 dim_params: "batch" }
  inputs { name: "y" dtype: FLOAT32 dims: -1 dims: 3 dim_params: "rows" }
  constants { name: "w" dtype: FLOAT32 dims: 4 dims: 3 raw_data: "000000000000000000000000000000000000000000000000" }
  nodes { name: "d" op: "dense" inputs: "x" inputs: "w" }
  nodes { name: "t" op: "transpose" inputs: "x" attributes { key: "perm" value { ints { values: 1 values: 0 } } } }
  nodes { name: "c" op: "concat" inputs: "x" inputs: "y" attributes { key: "axis" value { i: 0 } } }
  outputs: "d"
  outputs: "t"
  outputs: "c"
)pb";

TEST(OutputDimsTest, DimsThatFollowASymbolAreSymbolicAndNamed) {
  kiln::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kGraph, &proto));
  absl::StatusOr<ModelSignature> signature = ReadKilnGraphSignature(proto);
  ASSERT_TRUE(signature.ok()) << signature.status();
  ImportAtShapes import_at = [&](const InputShapes& shapes, const InputShapes&) {
    return ImportKilnGraph(proto, OpRegistry::Default(), &shapes);
  };
  absl::Status filled = FillOutputDims(*signature, import_at, {{"x", {2, 3}}, {"y", {2, 3}}});
  ASSERT_TRUE(filled.ok()) << filled;
  ASSERT_EQ(signature->outputs.size(), 3u);
  const TensorSignature& d = signature->outputs[0];
  EXPECT_TRUE(d.has_shape);
  EXPECT_EQ(d.dims, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(d.symbols, (std::vector<std::string>{"batch", ""}));
  EXPECT_EQ(signature->outputs[1].dims, (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(signature->outputs[1].symbols, (std::vector<std::string>{"", "batch"}));
  // batch + rows: symbolic, but no one symbol's size.
  EXPECT_EQ(signature->outputs[2].dims, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(signature->outputs[2].symbols, (std::vector<std::string>{"", ""}));
}

}  // namespace
}  // namespace kiln
