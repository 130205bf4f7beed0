// Tensors of every element type through compiled kernels and the constant
// folder: narrow integers wrap at every op as NumPy's do (also where ops are
// fused and the value never goes to memory), float16 and bfloat16 are stored
// rounded to nearest even and computed in float32, float64 keeps double
// precision. References are computed here on the host with the same
// definitions (C++ integer wrapping, common/half_float's exact conversions).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/half_float.h"
#include "compiler/ir/element_access.h"
#include "gtest/gtest.h"
#include "engine/model_manager.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::Op;
using runtime::Tensor;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::shared_ptr<ConstantData> ConstantOf(const TensorType& type, const std::string& bytes) {
  auto data = std::make_shared<ConstantData>();
  data->type = type;
  data->bytes = bytes;
  return data;
}

class ElementTypesTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto m = engine::ModelManager::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  bool fold() const { return GetParam(); }

  // `build` over inputs of `types` holding `data`, compiled and run, or with
  // fold() the inputs are constants and the result folds at compile time
  // (the graph then takes a dummy input it ignores). The output's bytes.
  std::string Run(const std::vector<TensorType>& types, const std::vector<std::string>& data,
                  const std::function<Node*(Graph&, const std::vector<Node*>&)>& build) {
    Graph g;
    std::vector<Node*> xs;
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      xs.push_back(fold() ? g.AddConstant(name, ConstantOf(types[i], data[i]))
                          : g.AddInput(name, types[i]));
    }
    Node* out = build(g, xs);
    if (fold()) g.AddInput("unused", TensorType{DType::kFloat32, {1}});
    g.AddOutput(out);
    const std::string name = "m" + std::to_string(counter_++);
    auto compiled = manager_->Compile(name, std::move(g), CompileOptions{});
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return "";
    std::vector<Tensor> inputs;
    if (fold()) {
      const float zero = 0;
      inputs.push_back(*Tensor::FromBytes(TensorType{DType::kFloat32, {1}},
                                          absl::string_view(reinterpret_cast<const char*>(&zero),
                                                            sizeof zero)));
    } else {
      for (size_t i = 0; i < types.size(); ++i) {
        auto t = Tensor::FromBytes(types[i], data[i]);
        EXPECT_TRUE(t.ok()) << t.status();
        inputs.push_back(*std::move(t));
      }
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    auto result = manager_->Find(name)->Run(ptrs);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return "";
    const Tensor& y = result->outputs[0];
    return std::string(static_cast<const char*>(y.data()), y.type().ByteSize());
  }

  std::unique_ptr<engine::ModelManager> manager_;
  int counter_ = 0;
};

// 67 elements: two whole 16-lane vectors, a partial one, and a scalar tail.
constexpr int64_t kN = 67;

TEST_P(ElementTypesTest, Uint8ArithmeticWrapsAtEveryFusedOp) {
  std::vector<uint8_t> a(kN), b(kN);
  for (int64_t i = 0; i < kN; ++i) {
    a[i] = static_cast<uint8_t>(150 + i * 3);
    b[i] = static_cast<uint8_t>(90 + i * 7);
  }
  const TensorType t{DType::kUInt8, {kN}};
  // (a + b) * 3 - a, then / 7: the sum already wraps before the multiply.
  std::string got = Run({t, t}, {Bytes(a), Bytes(b)}, [](Graph& g, const std::vector<Node*>& x) {
    Node* three = g.AddConstant("three", ConstantOf(TensorType{DType::kUInt8, {}}, "\x03"));
    Node* seven = g.AddConstant("seven", ConstantOf(TensorType{DType::kUInt8, {}}, "\x07"));
    Node* s = Op(g, "mul", {Op(g, "add", {x[0], x[1]}), three});
    return Op(g, "div", {Op(g, "sub", {s, x[0]}), seven});
  });
  std::vector<uint8_t> y = Values<uint8_t>(got);
  ASSERT_EQ(y.size(), static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; ++i) {
    const uint8_t sum = static_cast<uint8_t>(a[i] + b[i]);
    const uint8_t s = static_cast<uint8_t>(static_cast<uint8_t>(sum * 3) - a[i]);
    EXPECT_EQ(y[i], static_cast<uint8_t>(s / 7)) << "at " << i;
  }
}

TEST_P(ElementTypesTest, Int8AndInt16AndInt32KeepTheirSignAndWidth) {
  for (DType dtype : {DType::kInt8, DType::kInt16, DType::kInt32}) {
    const int bits = static_cast<int>(DTypeSize(dtype) * 8);
    std::vector<int64_t> a(kN);
    std::string bytes(kN * DTypeSize(dtype), '\0');
    for (int64_t i = 0; i < kN; ++i) {
      a[i] = (i * 40503) % (int64_t{1} << bits) - (int64_t{1} << (bits - 1));
      std::memcpy(&bytes[i * DTypeSize(dtype)], &a[i], DTypeSize(dtype));  // little-endian
    }
    const TensorType t{dtype, {kN}};
    // x * x, then max(x, that): the square wraps to the type's width.
    std::string got = Run({t}, {bytes}, [](Graph& g, const std::vector<Node*>& x) {
      return Op(g, "maximum", {x[0], Op(g, "mul", {x[0], x[0]})});
    });
    ASSERT_EQ(got.size(), bytes.size());
    for (int64_t i = 0; i < kN; ++i) {
      const uint64_t sq = static_cast<uint64_t>(a[i]) * static_cast<uint64_t>(a[i]);
      // Sign-extend the low `bits` bits.
      const int64_t wrapped =
          static_cast<int64_t>(sq << (64 - bits)) >> (64 - bits);
      int64_t value = 0;
      std::memcpy(&value, &got[i * DTypeSize(dtype)], DTypeSize(dtype));
      value = static_cast<int64_t>(static_cast<uint64_t>(value) << (64 - bits)) >> (64 - bits);
      EXPECT_EQ(value, std::max(a[i], wrapped)) << DTypeName(dtype) << " at " << i;
    }
  }
}

TEST_P(ElementTypesTest, Float16AndBFloat16ComputeInFloat32AndRoundOnStore) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const bool half = dtype == DType::kFloat16;
    auto to_bits = [&](float f) { return half ? FloatToHalf(f) : FloatToBFloat16(f); };
    auto from_bits = [&](uint16_t h) { return half ? HalfToFloat(h) : BFloat16ToFloat(h); };
    std::vector<uint16_t> a(kN);
    for (int64_t i = 0; i < kN; ++i) a[i] = to_bits(-3.3f + 0.173f * static_cast<float>(i));
    a[5] = to_bits(NAN);
    const TensorType t{dtype, {kN}};
    // exp(x) * x + x, fused: float32 inside, one rounding at the store.
    std::string got = Run({t}, {Bytes(a)}, [](Graph& g, const std::vector<Node*>& x) {
      return Op(g, "add", {Op(g, "mul", {Op(g, "exp", {x[0]}), x[0]}), x[0]});
    });
    std::vector<uint16_t> y = Values<uint16_t>(got);
    ASSERT_EQ(y.size(), static_cast<size_t>(kN));
    for (int64_t i = 0; i < kN; ++i) {
      const float x = from_bits(a[i]);
      const float want = from_bits(to_bits(std::exp(x) * x + x));
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(from_bits(y[i]))) << i;
        continue;
      }
      // exp in float32 differs from the host's by an ulp or so of float32,
      // which can move the rounded value by one narrow ulp at most.
      const float got_value = from_bits(y[i]);
      EXPECT_NEAR(got_value, want, std::fabs(want) * (half ? 1e-3 : 8e-3) + 1e-6)
          << DTypeName(dtype) << " at " << i;
    }
  }
}

TEST_P(ElementTypesTest, CastToFloat16RoundsEvenWhenFused) {
  std::vector<float> a(kN);
  for (int64_t i = 0; i < kN; ++i) a[i] = 1.0f + 0.000123f * static_cast<float>(i * i);
  const TensorType t{DType::kFloat32, {kN}};
  // float32 -> float16 -> float32, fused into one kernel with the add.
  std::string got = Run({t}, {Bytes(a)}, [](Graph& g, const std::vector<Node*>& x) {
    Node* h = Op(g, "cast", {x[0]}, CastAttrs{DType::kFloat16});
    return Op(g, "add", {Op(g, "cast", {h}, CastAttrs{DType::kFloat32}), x[0]});
  });
  std::vector<float> y = Values<float>(got);
  ASSERT_EQ(y.size(), static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(y[i], HalfToFloat(FloatToHalf(a[i])) + a[i]) << "at " << i;
  }
}

// Inside a kernel a uint64 is an int64's bits; converted as one, 2^63 and
// up came out negative. The reference is C++'s own unsigned conversions.
TEST_P(ElementTypesTest, UInt64ConvertsToAndFromFloatsAsUnsigned) {
  const std::vector<uint64_t> a = {0,
                                   1,
                                   (uint64_t{1} << 53) + 1,
                                   (uint64_t{1} << 63) - 1,
                                   uint64_t{1} << 63,
                                   (uint64_t{1} << 63) + 2049,
                                   12345678901234567890u,
                                   ~uint64_t{0}};
  const TensorType t{DType::kUInt64, {static_cast<int64_t>(a.size())}};
  for (DType to : {DType::kFloat64, DType::kFloat32}) {
    std::string got = Run({t}, {Bytes(a)}, [&](Graph& g, const std::vector<Node*>& x) {
      return Op(g, "cast", {x[0]}, CastAttrs{to});
    });
    for (size_t i = 0; i < a.size(); ++i) {
      if (to == DType::kFloat64) {
        EXPECT_EQ(Values<double>(got)[i], static_cast<double>(a[i])) << a[i];
      } else {
        EXPECT_EQ(Values<float>(got)[i], static_cast<float>(a[i])) << a[i];
      }
    }
  }
  const std::vector<double> d = {0.0, 1.5, 9223372036854775807.0, 9.3e18, 1.2e19,
                                 18446744073709549568.0};
  std::string got = Run({TensorType{DType::kFloat64, {static_cast<int64_t>(d.size())}}},
                        {Bytes(d)}, [](Graph& g, const std::vector<Node*>& x) {
                          return Op(g, "cast", {x[0]}, CastAttrs{DType::kUInt64});
                        });
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(Values<uint64_t>(got)[i], static_cast<uint64_t>(d[i])) << d[i];
  }
  const std::vector<float> f = {3.0f, 1e19f, 1.7e19f};
  got = Run({TensorType{DType::kFloat32, {3}}}, {Bytes(f)},
            [](Graph& g, const std::vector<Node*>& x) {
              return Op(g, "cast", {x[0]}, CastAttrs{DType::kUInt64});
            });
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(Values<uint64_t>(got)[i], static_cast<uint64_t>(f[i])) << f[i];
  }
}

TEST_P(ElementTypesTest, Float64KeepsDoublePrecision) {
  std::vector<double> a(kN);
  for (int64_t i = 0; i < kN; ++i) a[i] = 1.0 + 1e-12 * static_cast<double>(i);
  const TensorType t{DType::kFloat64, {kN}};
  // (x - 1) * 1e12 is i to double precision; float32 would give 0.
  std::string got = Run({t}, {Bytes(a)}, [](Graph& g, const std::vector<Node*>& x) {
    std::vector<double> one{1.0}, big{1e12};
    Node* c1 = g.AddConstant("one", ConstantOf(TensorType{DType::kFloat64, {}}, Bytes(one)));
    Node* c2 = g.AddConstant("big", ConstantOf(TensorType{DType::kFloat64, {}}, Bytes(big)));
    return Op(g, "sqrt", {Op(g, "mul", {Op(g, "sub", {x[0], c1}), c2})});
  });
  std::vector<double> y = Values<double>(got);
  ASSERT_EQ(y.size(), static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(y[i], std::sqrt((a[i] - 1.0) * 1e12), 1e-9) << "at " << i;
  }
}

TEST_P(ElementTypesTest, IntegerSumAndMaxReduceInTheirOwnType) {
  std::vector<int16_t> a(4 * 40);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int16_t>(i * 977 - 20000);
  const TensorType t{DType::kInt16, {4, 40}};
  ReduceAttrs axis1;
  axis1.axes = {1};
  for (const char* op : {"sum", "max"}) {
    std::string got = Run({t}, {Bytes(a)}, [&](Graph& g, const std::vector<Node*>& x) {
      return Op(g, op, {x[0]}, axis1);
    });
    std::vector<int16_t> y = Values<int16_t>(got);
    ASSERT_EQ(y.size(), 4u) << op;
    for (int r = 0; r < 4; ++r) {
      int16_t want = std::string(op) == "sum" ? 0 : INT16_MIN;
      for (int c = 0; c < 40; ++c) {
        const int16_t v = a[r * 40 + c];
        want = std::string(op) == "sum" ? static_cast<int16_t>(want + v) : std::max(want, v);
      }
      EXPECT_EQ(y[r], want) << op << " row " << r;
    }
  }
}

// Generated kernels and the constant folder are two implementations of the
// same op definitions: for every element type and a set of ops (arithmetic
// wrapping and division by zero included, compares, casts to every type,
// reductions), both must give the same bytes (float sums, which kernels
// reassociate, within a few ulps).
class KernelsMatchFoldingTest : public ::testing::Test {
 protected:
  std::string Once(bool fold, DType dtype, const std::string& a, const std::string& b,
                   const std::function<Node*(Graph&, Node*, Node*)>& build) {
    auto m = engine::ModelManager::Create({});
    EXPECT_TRUE(m.ok());
    Graph g;
    const TensorType t{dtype, {3, 37}};
    Node* x = fold ? g.AddConstant("x", ConstantOf(t, a)) : g.AddInput("x", t);
    Node* y = fold ? g.AddConstant("y", ConstantOf(t, b)) : g.AddInput("y", t);
    if (fold) g.AddInput("unused", TensorType{DType::kFloat32, {1}});
    g.AddOutput(build(g, x, y));
    auto compiled = (*m)->Compile("m", std::move(g), CompileOptions{});
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return "";
    std::vector<Tensor> inputs;
    if (fold) {
      const float zero = 0;
      inputs.push_back(*Tensor::FromBytes(TensorType{DType::kFloat32, {1}},
                                          absl::string_view(reinterpret_cast<const char*>(&zero),
                                                            sizeof zero)));
    } else {
      inputs.push_back(*Tensor::FromBytes(t, a));
      inputs.push_back(*Tensor::FromBytes(t, b));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& in : inputs) ptrs.push_back(&in);
    auto result = (*m)->Find("m")->Run(ptrs);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return "";
    const Tensor& out = result->outputs[0];
    return std::string(static_cast<const char*>(out.data()), out.type().ByteSize());
  }
};

// Values of `dtype` covering its range: small numbers, zeros, the extremes.
std::string SampleValues(DType dtype, uint32_t seed) {
  const int64_t n = 3 * 37;
  std::string bytes(n * DTypeSize(dtype), '\0');
  uint64_t state = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t r = static_cast<int64_t>(state >> 33) % 41 - 20;  // -20..20
    if (IsFloatDType(dtype)) {
      const double v = i % 11 == 0 ? 0.0 : i % 13 == 0 ? 1e30 : r * 0.37;
      WriteElementFromDouble(dtype, bytes.data(), i, v);
    } else {
      const int64_t v = i % 11 == 0 ? 0 : i % 17 == 0 ? INT64_MIN : i % 19 == 0 ? -1 : r;
      WriteElementFromInt(dtype, bytes.data(), i, v);
    }
  }
  return bytes;
}

TEST_F(KernelsMatchFoldingTest, EveryTypeAndOp) {
  using Build = std::function<Node*(Graph&, Node*, Node*)>;
  std::vector<std::pair<std::string, Build>> ops;
  for (const char* op : {"add", "sub", "mul", "div", "minimum", "maximum", "less", "equal"}) {
    ops.push_back({op, [op](Graph& g, Node* x, Node* y) { return Op(g, op, {x, y}); }});
  }
  for (const char* op : {"neg", "abs"}) {
    ops.push_back({op, [op](Graph& g, Node* x, Node*) { return Op(g, op, {x}); }});
  }
  for (DType to : kAllDTypes) {
    ops.push_back({absl::StrCat("cast_", DTypeName(to)), [to](Graph& g, Node* x, Node*) {
                     return Op(g, "cast", {x}, CastAttrs{to});
                   }});
  }
  ReduceAttrs axis1;
  axis1.axes = {1};
  for (const char* op : {"sum", "max", "min"}) {
    ops.push_back({absl::StrCat("reduce_", op),
                   [op, axis1](Graph& g, Node* x, Node*) { return Op(g, op, {x}, axis1); }});
  }
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::kBool) continue;
    const std::string a = SampleValues(dtype, 1), b = SampleValues(dtype, 2);
    for (const auto& [name, build] : ops) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", name));
      const std::string kernel = Once(false, dtype, a, b, build);
      const std::string folded = Once(true, dtype, a, b, build);
      ASSERT_EQ(kernel.size(), folded.size());
      if (kernel == folded) continue;
      // Only float sums may differ (kernels add in another order).
      ASSERT_TRUE(IsFloatDType(dtype) && name == "reduce_sum");
      const int64_t n = static_cast<int64_t>(kernel.size() / DTypeSize(dtype));
      for (int64_t i = 0; i < n; ++i) {
        const double k = ReadElementAsDouble(dtype, kernel.data(), i);
        const double f = ReadElementAsDouble(dtype, folded.data(), i);
        EXPECT_NEAR(k, f, std::fabs(f) * 1e-2 + 1e-3) << "at " << i;
      }
    }
  }
}

// Pools of every float type (float64's average pool stopped the compiler:
// its window count was built as float32), and max pooling's indices.
TEST_F(KernelsMatchFoldingTest, PoolsOfEveryFloatType) {
  Pool2DAttrs window;
  window.kernel = {2, 3};
  window.padding = {1, 1, 0, 1};
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    const std::string a = SampleValues(dtype, 3);
    for (const char* op : {"avg_pool2d", "max_pool2d", "max_pool2d_indices"}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", op));
      auto build = [&](Graph& g, Node* x, Node*) {
        Node* planes = Op(g, "reshape", {x}, ReshapeAttrs{{1, 3, 1, 37}});
        return Op(g, op, {planes}, window);
      };
      const std::string kernel = Once(false, dtype, a, a, build);
      const std::string folded = Once(true, dtype, a, a, build);
      ASSERT_FALSE(kernel.empty());
      EXPECT_EQ(kernel, folded);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CompiledAndFolded, ElementTypesTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Folded" : "Compiled";
                         });

}  // namespace
}  // namespace kiln
