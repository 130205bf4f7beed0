#include "compiler/frontend/kiln_graph_importer.h"

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

TEST(KilnGraphImporterTest, UnsupportedDTypeIsInvalidArgument) {
  absl::Status s = ImportText(R"pb(
    inputs { name: "x" dims: 2 }
    nodes { name: "r" op: "relu" inputs: "x" }
    outputs: "r"
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
