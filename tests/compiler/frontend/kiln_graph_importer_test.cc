#include "compiler/frontend/kiln_graph_importer.h"

#include "absl/strings/str_cat.h"
#include "compiler/ops/op_registry.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

absl::Status ImportText(const std::string& text) {
  kiln::v1::Graph g;
  if (!google::protobuf::TextFormat::ParseFromString(text, &g)) {
    return absl::InternalError("bad test text");
  }
  return ImportKilnGraph(g, OpRegistry::Default()).status();
}

TEST(KilnGraphImporterTest, ImportsAValidGraph) {
  kiln::v1::Graph g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 dims: 3 }
    nodes { name: "r" op: "relu" inputs: "x" }
    nodes { name: "t" op: "transpose" inputs: "r" attributes { key: "perm" value { ints { values: 1 values: 0 } } } }
    outputs: "t"
  )pb", &g));
  absl::StatusOr<Graph> graph = ImportKilnGraph(g, OpRegistry::Default());
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->num_nodes(), 3);
  EXPECT_EQ(std::get<TransposeAttrs>(graph->outputs()[0]->attrs).perm,
            (std::vector<int64_t>{1, 0}));
}

TEST(KilnGraphImporterTest, UnknownOpIsUnimplementedNamingTheNode) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "mystery" op: "frobnicate" inputs: "x" }
    outputs: "mystery"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("mystery"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("frobnicate"));
}

TEST(KilnGraphImporterTest, UndefinedInputIsInvalidArgumentNamingBoth) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "r" op: "relu" inputs: "nowhere" }
    outputs: "r"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'r' reads 'nowhere'"));
}

TEST(KilnGraphImporterTest, RejectsCycleWithInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "a" op: "add" inputs: "x" inputs: "b" }
    nodes { name: "b" op: "relu" inputs: "a" }
    outputs: "b"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cycle"));
}

TEST(KilnGraphImporterTest, WrongArityIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "a" op: "add" inputs: "x" }
    outputs: "a"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected 2"));
}

TEST(KilnGraphImporterTest, ConstantWithWrongByteCountIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    constants { name: "c" dtype: FLOAT32 dims: 2 raw_data: "abc" }
    nodes { name: "r" op: "relu" inputs: "c" }
    outputs: "r"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs 8 bytes"));
}

TEST(KilnGraphImporterTest, HugeShapeIsInvalidArgumentNotOverflow) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 4611686018427387904 dims: 4 }
    nodes { name: "r" op: "relu" inputs: "x" }
    outputs: "r"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit"));
}

TEST(KilnGraphImporterTest, DuplicateNameIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "x" op: "relu" inputs: "x" }
    outputs: "x"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("defined twice"));
}

TEST(KilnGraphImporterTest, UnknownAttributeIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dtype: FLOAT32 dims: 2 }
    nodes { name: "s" op: "softmax" inputs: "x" attributes { key: "axsi" value { i: 0 } } }
    outputs: "s"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("axsi"));
}

// Integer attributes past 2^31 are refused before any shape arithmetic
// sees them (pads of INT64_MAX wrapped to a valid shape and compiled).
TEST(KilnGraphImporterTest, HugeIntegerAttributesAreInvalidArgumentNotAWrappedShape) {
  for (const char* attrs :
       {R"pb(key: "padding" value { ints { values: 9223372036854775807 values: 9223372036854775807
                                             values: 9223372036854775807 values: 9223372036854775807 } })pb",
        R"pb(key: "strides" value { ints { values: 4294967296 values: 1 } })pb"}) {
    SCOPED_TRACE(attrs);
    absl::Status s = ImportText(absl::StrCat(R"pb(
      inputs { name: "x" dtype: FLOAT32 dims: 1 dims: 1 dims: 4 dims: 4 }
      constants { name: "w" dtype: FLOAT32 dims: 1 dims: 1 dims: 1 dims: 1 raw_data: "\000\000\200?" }
      nodes { name: "c" op: "conv2d" inputs: "x" inputs: "w" attributes { )pb",
                                             attrs, R"pb( } }
      outputs: "c"
    )pb"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("out of range"));
  }
}

TEST(KilnGraphImporterTest, UnsupportedDTypeIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dims: 2 }
    nodes { name: "r" op: "relu" inputs: "x" }
    outputs: "r"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

kiln::v1::Graph ParseGraph(const std::string& text) {
  kiln::v1::Graph g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g));
  return g;
}

// y = relu(x) + b with x: [batch, 3] and b: [batch, 3], plus an unnamed free dim.
constexpr char kSymbolicGraph[] = R"pb(
  inputs { name: "x" dtype: FLOAT32 dims: -1 dims: 3 dim_params: "batch" }
  inputs { name: "b" dtype: FLOAT32 dims: -1 dims: 3 dim_params: "batch" }
  nodes { name: "r" op: "relu" inputs: "x" }
  nodes { name: "y" op: "add" inputs: "r" inputs: "b" }
  outputs: "y"
)pb";

TEST(KilnGraphImporterTest, SymbolicDimsAreReadIntoTheSignature) {
  absl::StatusOr<ModelSignature> s = ReadKilnGraphSignature(ParseGraph(kSymbolicGraph));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->inputs.size(), 2u);
  EXPECT_EQ(s->inputs[0].dims, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(s->inputs[0].symbols, (std::vector<std::string>{"batch", ""}));
  EXPECT_TRUE(s->IsSymbolic());
  ASSERT_EQ(s->outputs.size(), 1u);
  EXPECT_FALSE(s->outputs[0].has_shape);
}

TEST(KilnGraphImporterTest, SymbolicDimsImportAtTheShapesGiven) {
  const kiln::v1::Graph g = ParseGraph(kSymbolicGraph);
  std::map<std::string, std::vector<int64_t>> shapes = {{"x", {5, 3}}, {"b", {5, 3}}};
  absl::StatusOr<Graph> graph = ImportKilnGraph(g, OpRegistry::Default(), &shapes);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->inputs().size(), 2u);
  EXPECT_EQ(graph->inputs()[0]->type.shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(graph->inputs()[1]->type.shape, (std::vector<int64_t>{5, 3}));
  // Not fixed: refused, naming the input and dim.
  absl::Status unfixed = ImportKilnGraph(g, OpRegistry::Default()).status();
  EXPECT_EQ(unfixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unfixed.message()), HasSubstr("input 'x' dim 0 is -1 (symbolic)"));
  // A fixed dim cannot be changed.
  shapes["x"] = {5, 4};
  absl::Status changed = ImportKilnGraph(g, OpRegistry::Default(), &shapes).status();
  EXPECT_THAT(std::string(changed.message()), HasSubstr("input 'x' dim 1 is 3, given 4"));
}

TEST(KilnGraphImporterTest, MalformedSymbolicDimsAreInvalidArgument) {
  for (const char* text : {
           R"pb(inputs { name: "x" dtype: FLOAT32 dims: -2 })pb",
           R"pb(inputs { name: "x" dtype: FLOAT32 dims: 4 dim_params: "batch" })pb",
           R"pb(inputs { name: "x" dtype: FLOAT32 dims: -1 dim_params: "a" dim_params: "b" })pb",
       }) {
    SCOPED_TRACE(text);
    EXPECT_EQ(ReadKilnGraphSignature(ParseGraph(text)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kiln
