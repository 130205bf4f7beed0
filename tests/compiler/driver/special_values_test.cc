// NaN goes through min, max, relu, clip, pools and max/min reductions as it
// does in NumPy and ONNX Runtime (issue 20: relu and max turned NaN into a
// finite value), both in generated kernels and in constant folding.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/model_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// x is 64 values (enough for whole vectors and a tail): NaN at 3, 17 and
// 40, the rest from -8 up in steps of 0.25.
std::vector<float> InputWithNaNs() {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -8.0f + 0.25f * static_cast<float>(i);
  for (size_t i : {3, 17, 40}) x[i] = kNaN;
  return x;
}

class SpecialValuesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  // `build` over input x of `shape` (64 elements), compiled and run on
  // InputWithNaNs(); with `fold`, x is a constant and the result folds.
  std::vector<float> Run(const std::vector<int64_t>& shape,
                         const std::function<Node*(Graph&, Node*)>& build, bool fold) {
    Graph g;
    const TensorType type{DType::kFloat32, shape};
    Node* input = g.AddInput("x", type);
    Node* x = fold ? g.AddConstant("xc", FloatValues(shape, InputWithNaNs())) : input;
    // Folded graphs still take x, so that the model has an input.
    Node* out = build(g, x);
    if (fold) {
      // + sum(x) * 0, a scalar 0 whatever out's shape: x is fed zeros.
      Node* zero = g.AddConstant("zero", FloatValues({}, {0.0f}));
      out = Op(g, "add", {out, Op(g, "mul", {Op(g, "sum", {input}, ReduceAttrs{}), zero})});
    }
    g.AddOutput(out);
    const std::string name = "m" + std::to_string(counter_++);
    auto compiled = manager_->Compile(name, std::move(g), CompileOptions{});
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return {};
    std::vector<float> feed = fold ? std::vector<float>(64, 0.0f) : InputWithNaNs();
    auto in = Tensor::FromBytes(type, absl::string_view(reinterpret_cast<const char*>(feed.data()),
                                                        feed.size() * sizeof(float)));
    EXPECT_TRUE(in.ok());
    auto result = manager_->Find(name)->Run({&*in});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    const float* p = static_cast<const float*>(result->outputs[0].data());
    return std::vector<float>(p, p + result->outputs[0].type().NumElements());
  }

  std::unique_ptr<engine::ModelManager> manager_;
  int counter_ = 0;
};

// Elementwise: each output is NaN exactly where x is, else `f` of x.
void ExpectElementwise(const std::vector<float>& got, const std::function<float(float)>& f) {
  const std::vector<float> x = InputWithNaNs();
  ASSERT_EQ(got.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": " << got[i];
    } else {
      EXPECT_EQ(got[i], f(x[i])) << "at " << i;
    }
  }
}

TEST_F(SpecialValuesTest, ReluMaxMinAndClipKeepNaN) {
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "folded" : "generated");
    ExpectElementwise(Run({64}, [](Graph& g, Node* x) { return Op(g, "relu", {x}); }, fold),
                      [](float v) { return v > 0 ? v : 0.0f; });
    ExpectElementwise(Run({64},
                          [](Graph& g, Node* x) {
                            return Op(g, "maximum", {x, g.AddConstant("one", FloatValues(
                                                                                 {}, {1.0f}))});
                          },
                          fold),
                      [](float v) { return v > 1 ? v : 1.0f; });
    // The constant first: NaN from the second operand propagates too.
    ExpectElementwise(Run({64},
                          [](Graph& g, Node* x) {
                            return Op(g, "minimum", {g.AddConstant("one", FloatValues({}, {1.0f})),
                                                     x});
                          },
                          fold),
                      [](float v) { return v < 1 ? v : 1.0f; });
    ExpectElementwise(
        Run({64},
            [](Graph& g, Node* x) {
              return Op(g, "clip", {x}, ActivationAttrs{/*alpha=*/-2.0f, /*beta=*/3.0f});
            },
            fold),
        [](float v) { return std::min(std::max(v, -2.0f), 3.0f); });
  }
}

TEST_F(SpecialValuesTest, MaximumOfTwoTensorsIsNaNWhereEitherIs) {
  // max(x, reverse-ish of x): NaN where x[i] or x[63 - i] is NaN.
  std::vector<float> other(64);
  const std::vector<float> x = InputWithNaNs();
  for (size_t i = 0; i < 64; ++i) other[i] = x[63 - i];
  std::vector<float> got = Run({64}, [&](Graph& g, Node* in) {
    return Op(g, "maximum", {in, g.AddConstant("other", FloatValues({64}, other))});
  }, /*fold=*/false);
  ASSERT_EQ(got.size(), 64u);
  for (size_t i = 0; i < 64; ++i) {
    if (std::isnan(x[i]) || std::isnan(other[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_EQ(got[i], std::max(x[i], other[i])) << "at " << i;
    }
  }
}

TEST_F(SpecialValuesTest, MaxAndMinReductionsAndMaxPoolAreNaNWhereTheyReadOne) {
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "folded" : "generated");
    // Rows of 16: rows 0, 1 and 2 hold a NaN (at 3, 17, 40), row 3 none.
    for (const char* op : {"max", "min"}) {
      SCOPED_TRACE(op);
      std::vector<float> got = Run({4, 16}, [&](Graph& g, Node* x) {
        return Op(g, op, {x}, ReduceAttrs{{1}, false});
      }, fold);
      ASSERT_EQ(got.size(), 4u);
      EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]) && std::isnan(got[2]));
      EXPECT_EQ(got[3], std::string(op) == "max" ? -8.0f + 0.25f * 63 : -8.0f + 0.25f * 48);
    }
    // 2x2 pools over an 8x8 plane: the windows holding 3 (row 0, col 3),
    // 17 (row 2, col 1) and 40 (row 5, col 0) are NaN.
    Pool2DAttrs pool;
    pool.kernel = {2, 2};
    pool.strides = {2, 2};
    std::vector<float> got = Run({1, 1, 8, 8}, [&](Graph& g, Node* x) {
      return Op(g, "max_pool2d", {x}, pool);
    }, fold);
    ASSERT_EQ(got.size(), 16u);
    const std::vector<float> x = InputWithNaNs();
    for (int oy = 0; oy < 4; ++oy) {
      for (int ox = 0; ox < 4; ++ox) {
        float want = -INFINITY;
        bool nan = false;
        for (int ky = 0; ky < 2; ++ky) {
          for (int kx = 0; kx < 2; ++kx) {
            const float v = x[(2 * oy + ky) * 8 + 2 * ox + kx];
            nan |= std::isnan(v);
            want = std::max(want, v);
          }
        }
        const float g = got[oy * 4 + ox];
        if (nan) {
          EXPECT_TRUE(std::isnan(g)) << oy << "," << ox;
        } else {
          EXPECT_EQ(g, want) << oy << "," << ox;
        }
      }
    }
  }
}

// Chains and trees of maximum (minimum) over 3 to 9 operands, which the
// emitter builds as one tree of compares with a NaN test per pair of
// operands: NaN wherever any operand is NaN; else the first operand that no
// later one beats, bit for bit (-0 and +0 tie, the first one stays), as
// pairwise "c > a ? c : a" gives. A constant -inf (+inf for min) operand,
// which the emitter drops, changes nothing.
TEST_F(SpecialValuesTest, MaxAndMinOfManyOperandsAreNaNWhereAnyIsElseTheFirstExtreme) {
  const std::vector<float> kValues = {kNaN, -INFINITY, INFINITY, -0.0f, 0.0f, 1.5f, -2.0f};
  constexpr int64_t kN = 7 * 7 * 7;
  struct Case {
    int operands;
    bool balanced;
    bool constant_loser;
  };
  for (const char* op : {"maximum", "minimum"}) {
    const bool max = std::string(op) == "maximum";
    for (const Case& c : {Case{3, false, false}, Case{3, true, true}, Case{4, true, false},
                          Case{5, false, true}, Case{9, false, false}, Case{9, true, false}}) {
      SCOPED_TRACE(::testing::Message() << op << " of " << c.operands << " balanced " << c.balanced
                                        << " constant " << c.constant_loser);
      // Operand j at element i: every combination of the first three
      // operands' values, the others pseudorandom.
      std::vector<std::vector<float>> x(c.operands, std::vector<float>(kN));
      uint32_t state = 12345;
      for (int j = 0; j < c.operands; ++j) {
        for (int64_t i = 0; i < kN; ++i) {
          state = state * 1664525u + 1013904223u;
          const int64_t pick = j < 3 ? i / (j == 0 ? 1 : j == 1 ? 7 : 49) % 7 : state >> 29;
          x[j][i] = kValues[pick % 7];
        }
      }
      Graph g;
      const TensorType type{DType::kFloat32, {kN}};
      std::vector<Node*> level;
      for (int j = 0; j < c.operands; ++j)
        level.push_back(g.AddInput("x" + std::to_string(j), type));
      if (c.constant_loser) {
        level.insert(level.begin() + 1,
                     g.AddConstant("loser", FloatValues({}, {max ? -INFINITY : INFINITY})));
      }
      if (c.balanced) {
        while (level.size() > 1) {
          std::vector<Node*> next;
          for (size_t i = 0; i + 1 < level.size(); i += 2) {
            next.push_back(Op(g, op, {level[i], level[i + 1]}));
          }
          if (level.size() % 2 == 1) next.push_back(level.back());
          level = std::move(next);
        }
      } else {
        for (size_t i = 1; i < level.size(); ++i) level[0] = Op(g, op, {level[0], level[i]});
      }
      g.AddOutput(level[0]);
      const std::string name = "many" + std::to_string(counter_++);
      ASSERT_TRUE(manager_->Compile(name, std::move(g), CompileOptions{}).ok());
      std::vector<Tensor> inputs;
      std::vector<const Tensor*> feed;
      for (const std::vector<float>& v : x) {
        auto t = Tensor::FromBytes(
            type, absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4));
        ASSERT_TRUE(t.ok());
        inputs.push_back(*std::move(t));
      }
      for (const Tensor& t : inputs) feed.push_back(&t);
      auto result = manager_->Find(name)->Run(feed);
      ASSERT_TRUE(result.ok()) << result.status();
      const float* got = static_cast<const float*>(result->outputs[0].data());
      for (int64_t i = 0; i < kN; ++i) {
        bool nan = false;
        float want = x[0][i];
        for (int j = 0; j < c.operands; ++j) {
          const float v = x[j][i];
          nan |= std::isnan(v);
          if (max ? v > want : v < want) want = v;
        }
        if (nan) {
          EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": " << got[i];
        } else {
          EXPECT_EQ(std::memcmp(&got[i], &want, 4), 0)
              << "at " << i << ": " << got[i] << " want " << want;
        }
      }
    }
  }
}

// maximum(y, y) of maximum(z, z) ... 48 deep: a DAG with 2^48 paths to x,
// which the emitter's tree of maxima must not unfold whole (it stops at 64
// leaves), nor any walk over the kernel's expressions (IR printing, index
// reassociation: 24 levels took 8 s before they stopped revisiting shared
// nodes). The result is x, NaN where x is.
TEST_F(SpecialValuesTest, ADeepDagOfMaximaCompilesAndKeepsX) {
  std::vector<float> got = Run(
      {64},
      [](Graph& g, Node* x) {
        Node* y = x;
        for (int i = 0; i < 48; ++i) y = Op(g, "maximum", {y, y});
        return y;
      },
      /*fold=*/false);
  ExpectElementwise(got, [](float v) { return v; });
}

// The same DAG of sums, y + y 48 deep: x times 2^48, exactly.
TEST_F(SpecialValuesTest, ADeepDagOfSumsCompilesAndScalesX) {
  std::vector<float> got = Run(
      {64},
      [](Graph& g, Node* x) {
        Node* y = x;
        for (int i = 0; i < 48; ++i) y = Op(g, "add", {y, y});
        return y;
      },
      /*fold=*/false);
  ExpectElementwise(got, [](float v) { return std::ldexp(v, 48); });
}

// 2^22 terms of 1 + 2^-10: a running float32 total above 2^15 rounds each
// term's 2^-10 away (a relative error of 1e-3, and 2^31 ones summed to
// 2^24); summed in blocks, every partial is exact and so is the total.
TEST_F(SpecialValuesTest, ALongSumKeepsItsSmallTerms) {
  constexpr int64_t kTerms = int64_t{1} << 22;
  Graph g;
  const TensorType type{DType::kFloat32, {kTerms}};
  Node* x = g.AddInput("x", type);
  g.AddOutput(Op(g, "sum", {x}, ReduceAttrs{}));
  auto compiled = manager_->Compile("long_sum", std::move(g), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const float term = 1.0f + 1.0f / 1024;
  std::vector<float> values(kTerms, term);
  auto in = Tensor::FromBytes(type, absl::string_view(reinterpret_cast<const char*>(values.data()),
                                                      values.size() * sizeof(float)));
  ASSERT_TRUE(in.ok());
  auto result = manager_->Find("long_sum")->Run({&*in});
  ASSERT_TRUE(result.ok()) << result.status();
  const float got = *static_cast<const float*>(result->outputs[0].data());
  EXPECT_EQ(got, static_cast<float>(kTerms) * term);  // 4198400, exactly
}

// Integer division and remainder by 0 and INT64_MIN / -1 trap on x86; the
// kernels and constant folding give NumPy's answers instead (0, and -x
// wrapping), and the server lives on.
TEST_F(SpecialValuesTest, IntegerDivisionNeverFaults) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> x = {7, -7, kMin, 9, kMin, -8};
  const std::vector<int64_t> y = {0, 0, -1, -1, 3, 3};
  const std::vector<int64_t> quotient = {0, 0, kMin, -9, kMin / 3, -2};
  const std::vector<int64_t> remainder = {0, 0, 0, 0, kMin % 3, -2};
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "folded" : "generated");
    Graph g;
    const TensorType type{DType::kInt64, {6}};
    Node* xi = g.AddInput("x", type);
    Node* yi = g.AddInput("y", type);
    Node* a = fold ? g.AddConstant("xc", kiln::testing::Int64Values({6}, x)) : xi;
    Node* b = fold ? g.AddConstant("yc", kiln::testing::Int64Values({6}, y)) : yi;
    g.AddOutput(Op(g, "div", {a, b}));
    g.AddOutput(Op(g, "mod", {a, b}, ModAttrs{true}));
    const std::string name = fold ? "int_div_folded" : "int_div";
    ASSERT_TRUE(manager_->Compile(name, std::move(g), CompileOptions{}).ok());
    auto in_x = Tensor::FromBytes(type, absl::string_view(reinterpret_cast<const char*>(x.data()),
                                                          x.size() * 8));
    auto in_y = Tensor::FromBytes(type, absl::string_view(reinterpret_cast<const char*>(y.data()),
                                                          y.size() * 8));
    auto result = manager_->Find(name)->Run({&*in_x, &*in_y});
    ASSERT_TRUE(result.ok()) << result.status();
    const int64_t* q = static_cast<const int64_t*>(result->outputs[0].data());
    const int64_t* r = static_cast<const int64_t*>(result->outputs[1].data());
    EXPECT_EQ(std::vector<int64_t>(q, q + 6), quotient);
    EXPECT_EQ(std::vector<int64_t>(r, r + 6), remainder);
  }
}

}  // namespace
}  // namespace kiln
