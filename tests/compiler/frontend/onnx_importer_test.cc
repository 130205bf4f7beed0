// ONNX models written by onnx's own Python helpers, imported, compiled, run
// through the JIT and compared with NumPy (data/make_onnx_fixtures.py).
#include "compiler/frontend/onnx_importer.h"

#include <sys/wait.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

#include "compiler/ops/op_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "engine/model_manager.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Data(const std::string& name) {
  std::ifstream in("tests/compiler/frontend/data/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<float> RunCase(const std::string& name, int opt_level) {
  auto graph = ImportOnnxModel(Data(name + ".onnx"), OpRegistry::Default(), {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return {};
  auto manager = engine::ModelManager::Create({});
  EXPECT_TRUE(manager.ok());
  CompileOptions options;
  options.opt_level = opt_level;
  auto compiled = (*manager)->Compile(name, *std::move(graph), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  auto x = testing::ReadNpyFloat32("tests/compiler/frontend/data/" + name + "_x.npy");
  EXPECT_TRUE(x.ok());
  auto model = (*manager)->Find(name);
  auto input = runtime::Tensor::FromBytes({DType::kFloat32, x->shape}, x->bytes());
  EXPECT_TRUE(input.ok()) << input.status();
  auto result = model->Run({&*input});
  EXPECT_TRUE(result.ok()) << result.status();
  const runtime::Tensor& out = result->outputs[0];
  const float* p = static_cast<const float*>(out.data());
  return std::vector<float>(p, p + out.type().NumElements());
}

void ExpectMatchesNumPy(const std::string& name, const std::vector<float>& got) {
  auto want = testing::ReadNpyFloat32("tests/compiler/frontend/data/" + name + "_y.npy");
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(got.size(), want->values.size());
  float max_ref = 1;
  for (float v : want->values) max_ref = std::max(max_ref, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want->values[i], 1e-4 * max_ref) << name << " at " << i;
  }
}

TEST(OnnxImporterTest, SmallCnnMatchesNumPyAtEveryOptLevel) {
  for (int level : {0, 2, 3}) {
    SCOPED_TRACE(level);
    ExpectMatchesNumPy("small_cnn", RunCase("small_cnn", level));
  }
}

TEST(OnnxImporterTest, MatMulReshapeTransposeReduceMatchNumPy) {
  ExpectMatchesNumPy("matmul_mix", RunCase("matmul_mix", 2));
}

TEST(OnnxImporterTest, OneDimensionalConvolutionsMatchNumPy) {
  for (int level : {0, 2}) {
    SCOPED_TRACE(level);
    ExpectMatchesNumPy("conv1d", RunCase("conv1d", level));
  }
}

TEST(OnnxImporterTest, OutputsKeepTheirOnnxNames) {
  auto graph = ImportOnnxModel(Data("small_cnn.onnx"), OpRegistry::Default(), {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->output_names(), ::testing::ElementsAre("probs"));
}

TEST(OnnxImporterTest, SymbolicBatchTakesTheGivenShape) {
  OnnxImportOptions options;
  options.input_shapes["x"] = {3, 3, 12, 12};
  auto graph = ImportOnnxModel(Data("small_cnn.onnx"), OpRegistry::Default(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->inputs()[0]->type.shape, (std::vector<int64_t>{3, 3, 12, 12}));
  EXPECT_EQ(graph->outputs()[0]->type.shape, (std::vector<int64_t>{3, 5}));
  OnnxImportOptions bad;
  bad.input_shapes["x"] = {3, 12, 12};
  EXPECT_EQ(ImportOnnxModel(Data("small_cnn.onnx"), OpRegistry::Default(), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OnnxImporterTest, UnsupportedOperatorIsUnimplementedNamingOpNodeAndOpset) {
  auto graph = ImportOnnxModel(Data("unsupported_op.onnx"), OpRegistry::Default(), {});
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("RandomUniformLike"));
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("the_random"));
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("opset 13"));
}

TEST(OnnxImporterTest, ExternalDataIsRefusedWithInvalidArgument) {
  auto graph = ImportOnnxModel(Data("external_data.onnx"), OpRegistry::Default(), {});
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("external"));
}

TEST(OnnxImporterTest, GarbageBytesAreInvalidArgument) {
  EXPECT_EQ(ImportOnnxModel("\x08\x07garbage\xff\xff\xff", OpRegistry::Default(), {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::string truncated = Data("small_cnn.onnx");
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(ImportOnnxModel(truncated, OpRegistry::Default(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OnnxImporterTest, SignatureKeepsSymbolicDimsUnlessTheUserFixesThem) {
  const std::string bytes = Data("mlp_dynamic.onnx");
  absl::StatusOr<ModelSignature> sig = ReadOnnxSignature(bytes, {});
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_EQ(sig->inputs.size(), 1u);  // initializers are not inputs
  EXPECT_EQ(sig->inputs[0].name, "x");
  EXPECT_THAT(sig->inputs[0].dims, ::testing::ElementsAre(-1, 16));
  EXPECT_THAT(sig->inputs[0].symbols, ::testing::ElementsAre("batch", ""));
  ASSERT_EQ(sig->outputs.size(), 1u);
  EXPECT_THAT(sig->outputs[0].dims, ::testing::ElementsAre(-1, 5));
  EXPECT_TRUE(sig->IsSymbolic());

  OnnxImportOptions fixed;
  fixed.input_shapes["x"] = {3, 16};
  sig = ReadOnnxSignature(bytes, fixed);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_THAT(sig->inputs[0].dims, ::testing::ElementsAre(3, 16));
  EXPECT_FALSE(sig->IsSymbolic());
  EXPECT_FALSE(ReadOnnxSignature(Data("matmul_mix.onnx"), {})->IsSymbolic());
  EXPECT_EQ(ReadOnnxSignature("garbage", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OnnxImporterTest, AnInputThatDecidesShapesIsNamedAndImportsOnceGivenItsValue) {
  const std::string bytes = Data("reshape_by_input.onnx");
  absl::Status needs = ImportOnnxModel(bytes, OpRegistry::Default(), {}).status();
  EXPECT_EQ(needs.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(InputsThatDecideShapes(needs), ElementsAre("shape"));
  EXPECT_THAT(std::string(needs.message()), HasSubstr("'shape' decides shapes"));
  EXPECT_THAT(InputsThatDecideShapes(absl::UnimplementedError("other")), IsEmpty());

  OnnxImportOptions options;
  options.input_shapes["shape"] = {2};
  options.input_values["shape"] = {4, 6};
  absl::StatusOr<Graph> graph = ImportOnnxModel(bytes, OpRegistry::Default(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->inputs().size(), 1u);  // "shape" became a constant
  EXPECT_EQ(graph->inputs()[0]->name, "x");
  // A value that does not fit the input's shape is refused.
  options.input_values["shape"] = {24};
  EXPECT_EQ(ImportOnnxModel(bytes, OpRegistry::Default(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A one-node model over a float input of `dims`, serialised; `attr` holds
// `value`, or with `list` the ints {value, value}.
std::string OneNodeModel(const std::string& op, const std::vector<int64_t>& dims,
                         const std::string& attr, int64_t value, bool list = false,
                         int opset = 13) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("one_node");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  n->add_input("x");
  n->add_output("y");
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attr);
  if (list) {
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(value);
    a->add_ints(value);
  } else {
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < dims.size(); ++i) {  // the output's dims left open
      auto* dim = v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
      if (std::string(name) == "x") {
        dim->set_dim_value(dims[i]);
      } else {
        dim->set_dim_param("d" + std::to_string(i));
      }
    }
  }
  return model.SerializeAsString();
}

TEST(OnnxImporterTest, AxesOutsideTheInputsRankAreInvalidArgumentNotACrash) {
  for (int64_t axis : {int64_t{3}, int64_t{-4}, int64_t{1} << 62, -(int64_t{1} << 62)}) {
    SCOPED_TRACE(axis);
    for (const char* op : {"Flatten", "Softmax", "LogSoftmax"}) {
      SCOPED_TRACE(op);
      absl::Status s =
          ImportOnnxModel(OneNodeModel(op, {2, 3}, "axis", axis), OpRegistry::Default(), {})
              .status();
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    }
  }
  // In range, Flatten's axis may be the rank itself.
  absl::StatusOr<Graph> last =
      ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 2), OpRegistry::Default(), {});
  EXPECT_TRUE(last.ok()) << last.status();
}

// Gemm reads two dims of A and B: a 1-D or 3-D operand is refused by Kiln's
// own converter, not only by libonnx's checker (off here, as for
// fuzz/onnx_converter_fuzzer, which found a 1-D B read past its shape).
TEST(OnnxImporterTest, GemmOperandsThatAreNotMatricesAreInvalidArgument) {
  struct Case {
    std::vector<int64_t> a, b;
    bool ok;
  };
  for (const Case& t : {Case{{3, 3}, {3, 3}, true}, Case{{2, 3}, {3}, false},
                        Case{{2, 3}, {1, 3, 4}, false}, Case{{3}, {3, 4}, false}}) {
    SCOPED_TRACE(::testing::PrintToString(t.a) + " x " + ::testing::PrintToString(t.b));
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(OneNodeModel("Gemm", t.a, "transB", 0)));
    onnx::GraphProto* g = model.mutable_graph();
    g->mutable_node(0)->add_input("b");
    g->mutable_node(0)->add_input("b");  // as bias too: a per-column one when B is 1-D
    onnx::TensorProto* b = g->add_initializer();
    b->set_name("b");
    b->set_data_type(onnx::TensorProto::FLOAT);
    int64_t elements = 1;
    for (int64_t d : t.b) {
      b->add_dims(d);
      elements *= d;
    }
    for (int64_t i = 0; i < elements; ++i) b->add_float_data(1.0f);
    OnnxImportOptions options;
    options.libonnx_checks = false;
    absl::StatusOr<Graph> graph =
        ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), options);
    if (t.ok) {
      EXPECT_TRUE(graph.ok()) << graph.status();
      continue;
    }
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
    EXPECT_THAT(std::string(graph.status().message()), HasSubstr("must be 2-D"));
  }
}

// An attribute list given with no values is refused, never indexed: a 1-D
// Conv's empty `strides` or `dilations` once threw std::out_of_range out of
// the converter (fatal in the server).
TEST(OnnxImporterTest, AConv1DWithAnEmptyStridesOrDilationsListIsInvalidArgument) {
  for (const char* attr : {"strides", "dilations", ""}) {
    SCOPED_TRACE(attr);
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(OneNodeModel("Conv", {1, 1, 5}, "strides", 1, true)));
    onnx::GraphProto* g = model.mutable_graph();
    onnx::NodeProto* n = g->mutable_node(0);
    n->add_input("w");
    n->mutable_attribute(0)->clear_ints();
    n->mutable_attribute(0)->add_ints(1);  // strides = {1}: one stride
    if (*attr != '\0') {
      onnx::AttributeProto* empty = std::string(attr) == "strides" ? n->mutable_attribute(0)
                                                                   : n->add_attribute();
      empty->set_name(attr);
      empty->set_type(onnx::AttributeProto::INTS);
      empty->clear_ints();
    }
    onnx::TensorProto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 1, 2}) w->add_dims(d);
    for (int i = 0; i < 2; ++i) w->add_float_data(1.0f);
    OnnxImportOptions options;
    options.libonnx_checks = false;
    absl::StatusOr<Graph> graph =
        ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), options);
    if (*attr == '\0') {  // the same Conv with its one stride imports
      EXPECT_TRUE(graph.ok()) << graph.status();
      continue;
    }
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
    EXPECT_THAT(std::string(graph.status().message()), HasSubstr("one stride, one dilation"));
  }
}

// A per-channel weight zero point of ConvInteger needs a weight with a
// channel axis: with a scalar weight it is refused, where the converter once
// wrote the channel count into an empty shape (a crash of the server itself,
// the conversion running beside libonnx's sandboxed checks).
TEST(OnnxImporterTest, APerChannelZeroPointOfAScalarWeightIsInvalidArgument) {
  auto model_with_weight = [](const std::vector<int64_t>& w_dims) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(13);
    onnx::GraphProto* g = model.mutable_graph();
    g->set_name("conv_integer");
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("ConvInteger");
    n->set_name("n");
    for (const char* input : {"x", "w", "", "w_zp"}) n->add_input(input);
    n->add_output("y");
    auto add_uint8 = [g](const std::string& name, const std::vector<int64_t>& dims) {
      onnx::TensorProto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::UINT8);
      int64_t elements = 1;
      for (int64_t d : dims) {
        t->add_dims(d);
        elements *= d;
      }
      t->set_raw_data(std::string(static_cast<size_t>(elements), '\x01'));
    };
    add_uint8("w", w_dims);
    add_uint8("w_zp", {2});
    for (const char* name : {"x", "y"}) {
      onnx::ValueInfoProto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
      v->set_name(name);
      auto* type = v->mutable_type()->mutable_tensor_type();
      type->set_elem_type(std::string(name) == "x" ? onnx::TensorProto::UINT8
                                                   : onnx::TensorProto::INT32);
      // x [1, 1, 3, 3]; y [1, 2, 2, 2], as the 2x2 kernels of two channels make.
      const std::vector<int64_t> dims = std::string(name) == "x" ? std::vector<int64_t>{1, 1, 3, 3}
                                                                 : std::vector<int64_t>{1, 2, 2, 2};
      for (int64_t d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
    }
    return model.SerializeAsString();
  };
  // Two output channels, one zero point each: imports.
  absl::StatusOr<Graph> per_channel =
      ImportOnnxModel(model_with_weight({2, 1, 2, 2}), OpRegistry::Default(), {});
  EXPECT_TRUE(per_channel.ok()) << per_channel.status();
  for (bool libonnx_checks : {true, false}) {
    SCOPED_TRACE(libonnx_checks);
    OnnxImportOptions options;
    options.libonnx_checks = libonnx_checks;
    absl::Status s =
        ImportOnnxModel(model_with_weight({}), OpRegistry::Default(), options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  OnnxImportOptions kiln_only;
  kiln_only.libonnx_checks = false;
  EXPECT_THAT(std::string(ImportOnnxModel(model_with_weight({}), OpRegistry::Default(), kiln_only)
                              .status()
                              .message()),
              HasSubstr("along axis 0 of a rank-0 tensor"));
}

// libonnx's checker and shape inference run in-process on untrusted bytes:
// the attribute values that crashed them are refused before they run.
TEST(OnnxImporterTest, AttributesThatCrashedLibOnnxAreInvalidArgument) {
  const int64_t huge = int64_t{1} << 62;
  struct Case {
    const char* op;
    const char* attr;
    int64_t value;
    bool list;
  };
  for (const Case& c : {Case{"LayerNormalization", "axis", INT64_MAX, false},
                        Case{"DepthToSpace", "blocksize", huge, false},
                        Case{"DepthToSpace", "blocksize", 0, false},
                        Case{"MaxPool", "strides", 0, true},
                        Case{"AveragePool", "kernel_shape", -3, true},
                        Case{"Conv", "dilations", 0, true}}) {
    SCOPED_TRACE(std::string(c.op) + " " + c.attr);
    absl::Status s = ImportOnnxModel(OneNodeModel(c.op, {1, 4, 4, 4}, c.attr, c.value, c.list,
                                                  /*opset=*/17),
                                     OpRegistry::Default(), {})
                         .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.attr));
  }
}

// What libonnx's checker refuses is refused with its own words whether or
// not the checks ran in a sandbox child (there, beside the conversion, the
// message coming back from the child), before any error of the conversion's:
// this model's unknown input would fail the conversion too.
TEST(OnnxImporterTest, WhatLibOnnxsCheckerRefusesIsInvalidArgumentWithItsMessage) {
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(OneNodeModel("Flatten", {2, 3}, "axis", 1)));
  model.mutable_graph()->mutable_node(0)->set_input(0, "nothing_makes_this");
  for (bool probe : {true, false}) {
    SCOPED_TRACE(probe);
    OnnxImportOptions options;
    options.probe_libonnx = probe;
    absl::Status s =
        ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("invalid ONNX model"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("nothing_makes_this"));
  }
}

// Opsets before 7: a model whose operators are defined as in opset 7 is read
// as opset 7 (Flatten has not changed from opset 1 to 7); one with an
// operator that changed at 7 (Add lost its broadcast attribute) is refused
// naming the node, as is an opset no operator has.
TEST(OnnxImporterTest, OpsetsBeforeSevenWhereTheOperatorsAreTheSame) {
  absl::StatusOr<Graph> flatten =
      ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 1, false, /*opset=*/1),
                      OpRegistry::Default(), OnnxImportOptions());
  ASSERT_TRUE(flatten.ok()) << flatten.status();
  ASSERT_EQ(flatten->outputs().size(), 1u);
  EXPECT_EQ(flatten->outputs()[0]->type.shape, (std::vector<int64_t>{2, 3}));

  absl::Status add =
      ImportOnnxModel(OneNodeModel("Add", {2, 3}, "broadcast", 1, false, /*opset=*/6),
                      OpRegistry::Default(), OnnxImportOptions())
          .status();
  EXPECT_EQ(add.code(), absl::StatusCode::kUnimplemented) << add;
  EXPECT_THAT(std::string(add.message()),
              HasSubstr("ONNX opset 6 is not supported (node 'n' (Add) is defined as in opset 6"));

  absl::Status none = ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 1, false, 0),
                                      OpRegistry::Default(), OnnxImportOptions())
                          .status();
  EXPECT_EQ(none.code(), absl::StatusCode::kUnimplemented) << none;
  EXPECT_THAT(std::string(none.message()), HasSubstr("ONNX opset 0 is not supported"));

  // Only the training domain (ONNX's Adagrad, Adam, Momentum cases): said so.
  onnx::ModelProto training;
  ASSERT_TRUE(training.ParseFromString(OneNodeModel("Adagrad", {2, 3}, "decay_factor", 0)));
  training.mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
  training.mutable_opset_import(0)->set_version(1);
  training.mutable_graph()->mutable_node(0)->set_domain("ai.onnx.preview.training");
  absl::Status trains = ImportOnnxModel(training.SerializeAsString(), OpRegistry::Default(),
                                        OnnxImportOptions())
                            .status();
  EXPECT_EQ(trains.code(), absl::StatusCode::kUnimplemented) << trains;
  EXPECT_THAT(std::string(trains.message()), HasSubstr("ONNX training operators"));
}

// An import refused before libonnx's checks, by a check of Kiln's own or by
// the parse, leaves no sandbox child behind.
TEST(OnnxImporterTest, AnImportRefusedBeforeTheSandboxVerdictLeavesNoChild) {
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(OneNodeModel("Add", {2, 3}, "broadcast", 1)));
  model.mutable_opset_import(0)->set_version(3);
  OnnxImportOptions options;
  options.probe_libonnx = true;
  absl::Status old_opset =
      ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), options).status();
  EXPECT_EQ(old_opset.code(), absl::StatusCode::kUnimplemented) << old_opset;
  absl::Status garbage =
      ImportOnnxModel("\xff\xff garbage", OpRegistry::Default(), options).status();
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument) << garbage;
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// The sandbox child checks while the model converts; the import waits for
// its verdict, so none is left running or unreaped.
TEST(OnnxImporterTest, AnImportThatPassesTheSandboxLeavesNoChild) {
  OnnxImportOptions options;
  options.probe_libonnx = true;
  absl::StatusOr<Graph> graph = ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 1),
                                                OpRegistry::Default(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// An op no ONNX opset has, in the default domain: libonnx's checker calls it
// invalid; Kiln answers Unimplemented, as for any op it cannot run.
TEST(OnnxImporterTest, AnUnknownOpInTheDefaultDomainIsUnimplemented) {
  absl::Status s =
      ImportOnnxModel(OneNodeModel("NoSuchOp", {2, 3}, "axis", 1), OpRegistry::Default(), {})
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("NoSuchOp"));
}

TEST(OnnxImporterTest, MoreNodesThanTheLimitIsResourceExhaustedNamingTheLimit) {
  OnnxImportOptions options;
  options.max_nodes = 2;  // the model has one node and one input: 2 is within
  EXPECT_TRUE(
      ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 1), OpRegistry::Default(), options)
          .ok());
  options.max_nodes = 1;
  absl::Status s =
      ImportOnnxModel(OneNodeModel("Flatten", {2, 3}, "axis", 1), OpRegistry::Default(), options)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit of 1"));
  EXPECT_EQ(s.GetPayload(kLimitPayload), absl::Cord(kNodeLimitName));
}

// A tensor naming an external file, wherever it sits, is refused before
// anything opens or stat()s the file: the answer is the same whether the
// file exists or not, so it tells nothing about the server's files.
TEST(OnnxImporterTest, ExternalDataAnywhereIsRefusedBeforeAnyFileIsTouched) {
  enum class Where { kConstantNode, kAttributeTensors, kSubgraphInitializer };
  for (Where where : {Where::kConstantNode, Where::kAttributeTensors,
                      Where::kSubgraphInitializer}) {
    std::vector<std::string> messages;
    for (const char* path : {"/etc/passwd", "/no/such/file"}) {
      SCOPED_TRACE(std::string(path) + " " + std::to_string(static_cast<int>(where)));
      onnx::ModelProto model;
      model.ParseFromString(OneNodeModel("Flatten", {2, 3}, "axis", 1));
      onnx::TensorProto outside;
      outside.set_name("w");
      outside.set_data_type(onnx::TensorProto::FLOAT);
      outside.add_dims(4);
      outside.set_data_location(onnx::TensorProto::EXTERNAL);
      onnx::StringStringEntryProto* location = outside.add_external_data();
      location->set_key("location");
      location->set_value(path);
      onnx::NodeProto* n = model.mutable_graph()->add_node();
      n->set_name("holder");
      n->set_op_type(where == Where::kConstantNode ? "Constant" : "If");
      n->add_output("c");
      onnx::AttributeProto* a = n->add_attribute();
      if (where == Where::kConstantNode) {
        a->set_name("value");
        a->set_type(onnx::AttributeProto::TENSOR);
        *a->mutable_t() = outside;
      } else if (where == Where::kAttributeTensors) {
        a->set_name("then_branch");
        a->set_type(onnx::AttributeProto::TENSORS);
        *a->add_tensors() = outside;
      } else {
        a->set_name("then_branch");
        a->set_type(onnx::AttributeProto::GRAPH);
        *a->mutable_g()->add_initializer() = outside;
      }
      absl::Status s =
          ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), {}).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("external file"));
      EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr(path)));
      messages.push_back(std::string(s.message()));
    }
    EXPECT_EQ(messages[0], messages[1]);
  }
}

// Found by //fuzz:onnx_importer_fuzzer: libonnx lets a Conv's or a pool's pads
// of 2 values through, and the conv2d and pool2d relations read 4.
TEST(OnnxImporterTest, WindowPadsOfTheWrongLengthAreInvalidArgument) {
  onnx::ModelProto conv;
  ASSERT_TRUE(conv.ParseFromString(OneNodeModel("Conv", {1, 1, 4, 4}, "pads", 1, /*list=*/true)));
  conv.mutable_graph()->mutable_node(0)->add_input("w");
  onnx::TensorProto* w = conv.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 1, 3, 3}) w->add_dims(d);
  for (int i = 0; i < 9; ++i) w->add_float_data(1);

  onnx::ModelProto pool;
  ASSERT_TRUE(
      pool.ParseFromString(OneNodeModel("MaxPool", {1, 1, 4, 4}, "pads", 1, /*list=*/true)));
  onnx::AttributeProto* kernel = pool.mutable_graph()->mutable_node(0)->add_attribute();
  kernel->set_name("kernel_shape");
  kernel->set_type(onnx::AttributeProto::INTS);
  kernel->add_ints(2);
  kernel->add_ints(2);

  for (const onnx::ModelProto* model : {&conv, &pool}) {
    SCOPED_TRACE(model->graph().node(0).op_type());
    absl::Status s =
        ImportOnnxModel(model->SerializeAsString(), OpRegistry::Default(), {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("4 pads"));
  }
}

// OneHot with constant depth and values (as exporters write it), negative
// indices counting from depth; the expected rows worked out by hand.
TEST(OnnxImporterTest, OneHotWithConstantDepthAndValues) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("one_hot");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type("OneHot");
  node->set_name("one_hot");
  for (const char* in : {"i", "depth", "values"}) node->add_input(in);
  node->add_output("y");
  onnx::TensorProto* depth = g->add_initializer();
  depth->set_name("depth");
  depth->set_data_type(onnx::TensorProto::INT64);
  depth->add_int64_data(4);
  onnx::TensorProto* values = g->add_initializer();
  values->set_name("values");
  values->set_data_type(onnx::TensorProto::FLOAT);
  values->add_dims(2);
  values->add_float_data(0);
  values->add_float_data(5);
  onnx::ValueInfoProto* i = g->add_input();
  i->set_name("i");
  i->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  i->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {3, 4}) {
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  auto graph = ImportOnnxModel(model.SerializeAsString(), OpRegistry::Default(), {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->Compile("one_hot", *std::move(graph), CompileOptions{}).ok());
  const std::vector<int64_t> indices = {0, -1, 2};
  auto input = runtime::Tensor::FromBytes(
      {DType::kInt64, {3}}, absl::string_view(reinterpret_cast<const char*>(indices.data()), 24));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("one_hot")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  const float* out = static_cast<const float*>(result->outputs[0].data());
  EXPECT_THAT(std::vector<float>(out, out + 12),
              ElementsAre(5, 0, 0, 0, 0, 0, 0, 5, 0, 0, 5, 0));
}

// A QuantizeLinear model: x (float [n]) by a constant scale and uint8 zero
// point (or a zero point of `zp_type` for the error cases).
onnx::ModelProto QuantizeModel(int64_t n, float scale, int zp_type, int32_t zp) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("quantize");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type("QuantizeLinear");
  node->set_name("q");
  for (const char* in : {"x", "scale", "zp"}) node->add_input(in);
  node->add_output("y");
  onnx::TensorProto* s = g->add_initializer();
  s->set_name("scale");
  s->set_data_type(onnx::TensorProto::FLOAT);
  s->add_float_data(scale);
  onnx::TensorProto* z = g->add_initializer();
  z->set_name("zp");
  z->set_data_type(zp_type);
  z->add_int32_data(zp);
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(n);
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(zp_type);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(n);
  return model;
}

// round-half-to-even(x / 0.5) + 10, saturated to uint8: worked out by hand.
TEST(OnnxImporterTest, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  const std::vector<float> x = {-1.0f, 0.5f, 1.26f, 300.0f, 0.75f, 0.25f, -20.0f};
  auto graph = ImportOnnxModel(
      QuantizeModel(7, 0.5f, onnx::TensorProto::UINT8, 10).SerializeAsString(),
      OpRegistry::Default(), {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->Compile("q", *std::move(graph), CompileOptions{}).ok());
  auto input = runtime::Tensor::FromBytes(
      {DType::kFloat32, {7}}, absl::string_view(reinterpret_cast<const char*>(x.data()), 28));
  ASSERT_TRUE(input.ok());
  auto result = (*manager)->Find("q")->Run({&*input});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs[0].type().dtype, DType::kUInt8);
  const uint8_t* out = static_cast<const uint8_t*>(result->outputs[0].data());
  EXPECT_THAT(std::vector<int>(out, out + 7), ElementsAre(8, 11, 13, 255, 12, 10, 0));
}

TEST(OnnxImporterTest, BadQuantisationParametersAreInvalidArgument) {
  for (float scale : {0.0f, -1.0f, NAN, INFINITY}) {
    absl::Status s = ImportOnnxModel(
        QuantizeModel(4, scale, onnx::TensorProto::UINT8, 0).SerializeAsString(),
        OpRegistry::Default(), {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << scale << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("scale"));
  }
  // A zero point of a type QuantizeLinear cannot produce.
  absl::Status s = ImportOnnxModel(
      QuantizeModel(4, 1.0f, onnx::TensorProto::INT32, 70000).SerializeAsString(),
      OpRegistry::Default(), {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("zero point"));
}

}  // namespace
}  // namespace kiln
