#include "compiler/passes/integer_qdq_matmul.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compiler/passes/infer_type.h"
#include "compiler/passes/simplify_fake_quant.h"
#include "compiler/passes/qdq_operands.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

struct MatMulCase {
  std::vector<int64_t> rows{2, 5};  // x's leading dims
  int64_t k = 37, n = 21;
  bool transposed = false;  // dense: w is (n, k)
  float x_scale = 0.1f;
  float zero = 128;            // the activation's zero point
  bool int8 = false;           // activations int8 (clip to [-128, 127]), not uint8
  std::vector<float> weights;  // integers, (k, n), or (n, k) when transposed
  std::vector<float> scale;    // per column: x_scale * w_scale
  std::vector<float> bias;
  float w(int64_t kk, int64_t j) const {
    return transposed ? weights[j * k + kk] : weights[kk * n + j];
  }
};

// Random weights, scales and biases for the sizes of `m`.
MatMulCase RandomCase(uint32_t seed, float zero, MatMulCase m = {}) {
  m.zero = zero;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> weight(-128, 127);
  for (int64_t i = 0; i < m.k * m.n; ++i) m.weights.push_back(weight(rng));
  std::uniform_real_distribution<float> u(0.001f, 0.01f);
  for (int64_t i = 0; i < m.n; ++i) {
    m.scale.push_back(u(rng));
    m.bias.push_back(u(rng) * 100 - 0.5f);
  }
  return m;
}

std::vector<int64_t> XShape(const MatMulCase& m) {
  std::vector<int64_t> shape = m.rows;
  shape.push_back(m.k);
  return shape;
}

int64_t Rows(const MatMulCase& m) {
  int64_t r = 1;
  for (int64_t d : m.rows) r *= d;
  return r;
}

// A QDQ MatMul (or Gemm with transB) as the ONNX importer builds it
// (QuantizeLinear, DequantizeLinear, the centered weight folded, the
// accumulator scaled per column, the bias added), then SimplifyFakeQuant, as
// the pipeline runs it before the pass.
Graph QdqMatMul(const MatMulCase& m) {
  Graph g;
  Node* x = g.AddInput("x", {DType::kFloat32, XShape(m)});
  Node* q = Op(g, "round", {Op(g, "div", {x, g.AddConstant("xs", FloatValues({}, {m.x_scale}))})});
  q = Op(g, "add", {q, g.AddConstant("zp", FloatValues({}, {m.zero}))});
  q = Op(g, "clip", {q}, m.int8 ? ActivationAttrs{-128, 127} : ActivationAttrs{0, 255});
  Node* back = Op(g, "cast", {Op(g, "cast", {q}, CastAttrs{m.int8 ? DType::kInt8 : DType::kUInt8})},
                  CastAttrs{DType::kFloat32});
  Node* centered = Op(g, "sub", {back, g.AddConstant("zp2", FloatValues({}, {m.zero}))});
  const std::vector<int64_t> w_shape =
      m.transposed ? std::vector<int64_t>{m.n, m.k} : std::vector<int64_t>{m.k, m.n};
  Node* w = g.AddConstant("w", FloatValues(w_shape, m.weights));
  Node* acc = Op(g, m.transposed ? "dense" : "matmul", {centered, w});
  Node* y = Op(g, "mul", {acc, g.AddConstant("s", FloatValues({m.n}, m.scale))});
  g.AddOutput(Op(g, "add", {y, g.AddConstant("b", FloatValues({m.n}, m.bias))}));
  EXPECT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> simplified = CreateSimplifyFakeQuantPass()->Run(g, PassContext{});
  EXPECT_TRUE(simplified.ok() && *simplified);
  return g;
}

absl::StatusOr<bool> RunPass(Graph& g, bool vnni) {
  return CreateIntegerQdqMatMulPassForTest(vnni)->Run(g, PassContext{});
}

TEST(IntegerQdqMatMulTest, MakesABatchedMatMulAndItsEpilogueOneIntegerOp) {
  Graph g = QdqMatMul(RandomCase(1, 128));
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const Node* q = g.outputs()[0];
  ASSERT_EQ(q->op_name(), "qmatmul_u8s8");
  EXPECT_EQ(q->inputs[0]->op_name(), "cast");
  EXPECT_EQ(q->inputs[0]->type.dtype, DType::kUInt8);
  EXPECT_EQ(q->inputs[0]->inputs[0]->op_name(), "clip");
  // 21 columns: 2 blocks of 16; K = 37 padded to 40, times 16 columns.
  EXPECT_EQ(q->inputs[1]->type, (TensorType{DType::kInt8, {2, 640}}));
  EXPECT_EQ(q->type, (TensorType{DType::kFloat32, {2, 5, 21}}));
}

TEST(IntegerQdqMatMulTest, PacksDenseWeightsTransposed) {
  MatMulCase m = RandomCase(4, 3);
  m.transposed = true;
  m.rows = {9};
  Graph g = QdqMatMul(m);
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* q = g.outputs()[0];
  ASSERT_EQ(q->op_name(), "qmatmul_u8s8");
  // The packed element of (k, n) = (5, 17): block 1, group 1, lane 1, byte 1.
  const int8_t* packed = reinterpret_cast<const int8_t*>(q->inputs[1]->value->bytes.data());
  EXPECT_EQ(packed[((1 * 10 + 1) * 16 + 1) * 4 + 1], static_cast<int8_t>(m.w(5, 17)));
  // The zero point's correction: -3 * the column's sum.
  int64_t sum = 0;
  for (int64_t kk = 0; kk < m.k; ++kk) sum += static_cast<int64_t>(m.w(kk, 17));
  const int32_t* correction = reinterpret_cast<const int32_t*>(q->inputs[2]->value->bytes.data());
  EXPECT_EQ(correction[17], -3 * sum);
}

TEST(IntegerQdqMatMulTest, LeavesTheGraphWithoutVnni) {
  Graph g = QdqMatMul(RandomCase(1, 128));
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/false);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.outputs()[0]->op_name(), "add");
}

TEST(IntegerQdqMatMulTest, LeavesWeightsThatAreNotInt8) {
  for (float bad : {0.5f, 128.0f, -129.0f}) {
    SCOPED_TRACE(bad);
    MatMulCase m = RandomCase(2, 0);
    m.weights[7] = bad;
    Graph g = QdqMatMul(m);
    absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
}

// A product of two activations (attention's Q x K^T) has no weight to pack.
TEST(IntegerQdqMatMulTest, LeavesProductsOfTwoActivations) {
  Graph g;
  Node* a = g.AddInput("a", {DType::kUInt8, {4, 8}});
  Node* b = g.AddInput("b", {DType::kFloat32, {8, 3}});
  Node* wide = Op(g, "cast", {a}, CastAttrs{DType::kFloat32});
  g.AddOutput(Op(g, "matmul", {wide, b}));
  ASSERT_TRUE(InferTypes(g).ok());
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

// The float x of the case, the reference's quantised value of each element.
float Quantised(const MatMulCase& m, float v) {
  return std::fmin(std::fmax(std::nearbyint(v / m.x_scale) + m.zero, m.int8 ? -128 : 0),
                   m.int8 ? 127 : 255);
}

// The compiled model against the integers summed here in int64: y =
// fma(float(sum (q - zero) * w), scale, bias), q the quantised input. The
// float32 path (pass disabled) must agree too, while its sums stay exact.
TEST(IntegerQdqMatMulTest, KernelsMatchAnIntegerReference) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  int models = 0;
  struct Shape {
    std::vector<int64_t> rows;
    int64_t k, n;
    bool transposed;
  };
  // The last: whole 32 x 32 blocks and K a multiple of 64, on AMX where the
  // host has it, the rows and columns past them on VNNI.
  for (const Shape& shape :
       {Shape{{2, 7}, 37, 70, false}, Shape{{13}, 64, 16, false}, Shape{{3, 4, 5}, 30, 33, false},
        Shape{{11}, 75, 129, true}, Shape{{2, 20}, 128, 70, false}}) {
    // uint8 activations, then int8 ones (ONNX Runtime's default QDQ activations).
    for (const auto& [zero, int8] : {std::pair{0.0f, false},
                                     {128.0f, false},
                                     {255.0f, false},
                                     {37.0f, false},
                                     {-128.0f, true},
                                     {0.0f, true},
                                     {127.0f, true},
                                     {-9.0f, true}}) {
      MatMulCase sizes;
      sizes.rows = shape.rows;
      sizes.k = shape.k;
      sizes.n = shape.n;
      sizes.transposed = shape.transposed;
      sizes.int8 = int8;
      const MatMulCase m = RandomCase(3 + models, zero, sizes);
      const int64_t rows = Rows(m);
      std::vector<float> x(rows * m.k);
      std::mt19937 rng(models);
      std::uniform_real_distribution<float> u(-15, 15);
      for (float& v : x) v = u(rng);
      std::vector<float> want(rows * m.n);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < m.n; ++j) {
          int64_t sum = 0;
          for (int64_t kk = 0; kk < m.k; ++kk) {
            sum += static_cast<int64_t>(Quantised(m, x[r * m.k + kk]) - zero) *
                   static_cast<int64_t>(m.w(kk, j));
          }
          want[r * m.n + j] = std::fma(static_cast<float>(sum), m.scale[j], m.bias[j]);
        }
      }
      for (bool integer : {true, false}) {
        SCOPED_TRACE(absl::StrCat("rows ", rows, " k ", m.k, " n ", m.n, " zero point ", zero,
                                  int8 ? " int8" : " uint8", integer ? ", integer" : ", float"));
        CompileOptions options;
        if (!integer) options.disabled_passes = {"IntegerQdqMatMul"};
        const std::string name = "m" + std::to_string(models++);
        auto compiled = (*manager)->Compile(name, QdqMatMul(m), options);
        ASSERT_TRUE(compiled.ok()) << compiled.status();
        bool on_vnni = false;
        for (const engine::KernelCompileReport& kernel : compiled->kernels) {
          on_vnni |= kernel.schedule.rfind("qmatmul u8s8", 0) == 0;
        }
        EXPECT_EQ(on_vnni, integer && HostHasVnni());
        const TensorType type{DType::kFloat32, XShape(m)};
        auto in = Tensor::FromBytes(
            type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
        ASSERT_TRUE(in.ok());
        auto result = (*manager)->Find(name)->Run({&*in});
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(result->outputs[0].type().NumElements(), static_cast<int64_t>(want.size()));
        const float* got = static_cast<const float*>(result->outputs[0].data());
        for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
        ASSERT_TRUE((*manager)->Unload(name).ok());  // the manager holds 64 at most
      }
    }
  }
}

std::shared_ptr<ConstantData> Int32Values(std::vector<int64_t> shape,
                                          const std::vector<int32_t>& values) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kInt32, std::move(shape)};
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  data->bytes = ConstantBytes(std::move(bytes));
  return data;
}

// QLinearMatMul's form as the importer leaves it after folding: a uint8
// input widened to int32 and centered, an int32 product with the centered
// int32 weight, converted to float32 and scaled per column. A uint8 input is
// used as it is.
TEST(IntegerQdqMatMulTest, QLinearMatMulFormMatchesAnIntegerReference) {
  const int64_t m = 10, k = 45, n = 19;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127);
  std::vector<int32_t> weights(k * n);
  for (int32_t& v : weights) v = weight(rng);
  std::vector<float> scale(n);
  for (int64_t i = 0; i < n; ++i) scale[i] = 0.001f * static_cast<float>(i + 1);
  std::vector<uint8_t> bytes(m * k);
  for (uint8_t& v : bytes) v = static_cast<uint8_t>(byte(rng));
  // uint8 input, then int8 (the same bytes as two's complement), which the
  // pass reads as uint8 with 128 added.
  for (const auto& [dtype, zero] : {std::pair{DType::kUInt8, 131}, {DType::kInt8, -7}}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto build = [&, dtype = dtype, zero = zero] {
      Graph g;
      Node* in = g.AddInput("x", {dtype, {m, k}});
      Node* wide = Op(g, "cast", {in}, CastAttrs{DType::kInt32});
      Node* centered = Op(g, "sub", {wide, g.AddConstant("zp", Int32Values({}, {zero}))});
      Node* acc = Op(g, "matmul", {centered, g.AddConstant("w", Int32Values({k, n}, weights))});
      Node* real = Op(g, "cast", {acc}, CastAttrs{DType::kFloat32});
      g.AddOutput(Op(g, "mul", {real, g.AddConstant("s", FloatValues({n}, scale))}));
      EXPECT_TRUE(InferTypes(g).ok());
      return g;
    };
    Graph g = build();
    absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
    ASSERT_TRUE(changed.ok() && *changed);
    ASSERT_EQ(g.outputs()[0]->op_name(), "qmatmul_u8s8");
    EXPECT_EQ(g.outputs()[0]->inputs[0]->is_input(), dtype == DType::kUInt8);

    std::vector<float> want(m * n);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const uint8_t b = bytes[r * k + kk];
          const int64_t v = dtype == DType::kUInt8 ? b : static_cast<int8_t>(b);
          sum += (v - zero) * int64_t{weights[kk * n + j]};
        }
        want[r * n + j] = static_cast<float>(sum) * scale[j];
      }
    }
    auto manager = engine::ModelManager::Create({});
    ASSERT_TRUE(manager.ok()) << manager.status();
    auto compiled = (*manager)->Compile("qlinear", build(), CompileOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    auto in = Tensor::FromBytes(
        {dtype, {m, k}},
        absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    ASSERT_TRUE(in.ok());
    auto result = (*manager)->Find("qlinear")->Run({&*in});
    ASSERT_TRUE(result.ok()) << result.status();
    const float* got = static_cast<const float*>(result->outputs[0].data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
  }
}

// MatMulInteger's form: the int32 product read as int32 becomes the op's
// int32 form, its sums exact where float32 would round them (past 2^24). The
// zero point is an input here, as DynamicQuantizeLinear computes it: the
// correction is then computed per run, and each run's zero point counts.
TEST(IntegerQdqMatMulTest, MatMulIntegerFormKeepsExactSumsWithAComputedZeroPoint) {
  const int64_t m = 7, k = 1100, n = 35;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> low(0, 3), high(252, 255), weight(120, 127);
  std::vector<int32_t> weights(k * n);
  for (int32_t& v : weights) v = weight(rng);
  for (int64_t i = 0; i < k; i += 7) weights[i * n + 3] = -128;
  std::vector<uint8_t> x(m * k);
  for (int64_t i = 0; i < m * k; ++i) {
    x[i] = static_cast<uint8_t>(i % 13 == 0 ? low(rng) : high(rng));
  }
  // The zero point as a scalar here, as a one-element vector in the next test.
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kUInt8, {m, k}});
    Node* zp = g.AddInput("zp", {DType::kUInt8, {}});
    Node* centered = Op(g, "sub",
                        {Op(g, "cast", {in}, CastAttrs{DType::kInt32}),
                         Op(g, "cast", {zp}, CastAttrs{DType::kInt32})});
    g.AddOutput(Op(g, "matmul", {centered, g.AddConstant("w", Int32Values({k, n}, weights))}));
    EXPECT_TRUE(InferTypes(g).ok());
    return g;
  };
  Graph g = build();
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* q = g.outputs()[0];
  ASSERT_EQ(q->op_name(), "qmatmul_u8s8");
  EXPECT_EQ(q->inputs.size(), 3u);
  EXPECT_EQ(q->type, (TensorType{DType::kInt32, {m, n}}));
  EXPECT_FALSE(q->inputs[2]->is_constant());

  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto compiled = (*manager)->Compile("integer", build(), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  bool on_vnni = false;
  for (const engine::KernelCompileReport& kernel : compiled->kernels) {
    on_vnni |= kernel.schedule.rfind("qmatmul u8s8", 0) == 0;
  }
  EXPECT_EQ(on_vnni, HostHasVnni());
  auto in = Tensor::FromBytes({DType::kUInt8, {m, k}},
                              absl::string_view(reinterpret_cast<const char*>(x.data()), x.size()));
  ASSERT_TRUE(in.ok());
  bool past_float = false;
  for (uint8_t zero : {uint8_t{0}, uint8_t{3}, uint8_t{200}}) {
    SCOPED_TRACE(static_cast<int>(zero));
    auto zp = Tensor::FromBytes({DType::kUInt8, {}},
                                absl::string_view(reinterpret_cast<const char*>(&zero), 1));
    ASSERT_TRUE(zp.ok());
    auto result = (*manager)->Find("integer")->Run({&*in, &*zp});
    ASSERT_TRUE(result.ok()) << result.status();
    const int32_t* got = static_cast<const int32_t*>(result->outputs[0].data());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          sum += (int64_t{x[r * k + kk]} - zero) * int64_t{weights[kk * n + j]};
        }
        past_float |= std::abs(sum) > (1 << 24);
        ASSERT_EQ(got[r * n + j], sum) << r << " " << j;
      }
    }
  }
  EXPECT_TRUE(past_float);  // the case tests what float32 sums would not
}

// A product with one output column: its correction, scale and bias are
// single constants, which lowering bakes into the kernel instead of passing
// them, so the op's own compute runs (not kiln_qmatmul_u8s8). A zero point of
// shape (1) is reshaped to the scalar the correction's product needs.
TEST(IntegerQdqMatMulTest, OneColumnRunsTheOpsComputeExactly) {
  const int64_t m = 6, k = 9, n = 1;
  const std::vector<int32_t> weights{3, -128, 127, 0, -5, 77, 1, -1, 100};
  std::vector<uint8_t> x(m * k);
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<uint8_t>((i * 97) % 256);
  auto build = [&] {
    Graph g;
    Node* in = g.AddInput("x", {DType::kUInt8, {m, k}});
    Node* zp = g.AddInput("zp", {DType::kUInt8, {1}});
    Node* centered = Op(g, "sub",
                        {Op(g, "cast", {in}, CastAttrs{DType::kInt32}),
                         Op(g, "cast", {zp}, CastAttrs{DType::kInt32})});
    Node* acc = Op(g, "matmul", {centered, g.AddConstant("w", Int32Values({k, n}, weights))});
    Node* real = Op(g, "cast", {acc}, CastAttrs{DType::kFloat32});
    g.AddOutput(Op(g, "mul", {real, g.AddConstant("s", FloatValues({n}, {0.25f}))}));
    EXPECT_TRUE(InferTypes(g).ok());
    return g;
  };
  Graph g = build();
  absl::StatusOr<bool> changed = RunPass(g, /*vnni=*/true);
  ASSERT_TRUE(changed.ok() && *changed);
  ASSERT_EQ(g.outputs()[0]->op_name(), "qmatmul_u8s8");

  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto compiled = (*manager)->Compile("column", build(), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const engine::KernelCompileReport& kernel : compiled->kernels) {
    EXPECT_NE(kernel.schedule.rfind("qmatmul u8s8", 0), 0u) << kernel.schedule;
  }
  auto in = Tensor::FromBytes({DType::kUInt8, {m, k}},
                              absl::string_view(reinterpret_cast<const char*>(x.data()), x.size()));
  const uint8_t zero = 131;
  auto zp = Tensor::FromBytes({DType::kUInt8, {1}},
                              absl::string_view(reinterpret_cast<const char*>(&zero), 1));
  ASSERT_TRUE(in.ok() && zp.ok());
  auto result = (*manager)->Find("column")->Run({&*in, &*zp});
  ASSERT_TRUE(result.ok()) << result.status();
  const float* got = static_cast<const float*>(result->outputs[0].data());
  for (int64_t r = 0; r < m; ++r) {
    int64_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) sum += (int64_t{x[r * k + kk]} - zero) * weights[kk];
    EXPECT_EQ(got[r], static_cast<float>(sum) * 0.25f) << r;
  }
}

}  // namespace
}  // namespace kiln
