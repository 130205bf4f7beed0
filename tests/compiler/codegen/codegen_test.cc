// Hand-built loop nests compiled by codegen, linked by the JIT and run,
// against plain C++ loops.
#include "compiler/codegen/codegen.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <vector>

#include "compiler/te/expr_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/jit_engine.h"

namespace kiln {
namespace {

using lower::ForKind;
using lower::LoopFunction;
using te::Expr;
using te::ScalarType;

class CodegenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jit = runtime::JitEngine::Create();
    ASSERT_TRUE(jit.ok()) << jit.status();
    jit_ = *jit;
  }

  std::shared_ptr<runtime::LoadedKernel> Build(const LoopFunction& fn) {
    auto object = codegen::CompileToObject(fn, codegen::CodegenOptions{});
    EXPECT_TRUE(object.ok()) << object.status();
    if (!object.ok()) return nullptr;
    auto kernel = jit_->Load(*object, fn.name);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? *kernel : nullptr;
  }

  te::ExprBuilder b_;
  std::shared_ptr<runtime::JitEngine> jit_;
};

TEST_F(CodegenTest, VectorAddMatchesLoop) {
  LoopFunction fn;
  fn.name = "vadd";
  const int64_t n = 1000;
  fn.buffers = {{"a", ScalarType::kF32, n}, {"b", ScalarType::kF32, n}, {"c", ScalarType::kF32, n}};
  fn.num_params = 3;
  te::Var i = b_.NewVar("i", n);
  Expr x = b_.Ref(i);
  fn.body = lower::MakeFor(i, ForKind::kVectorized,
                           lower::MakeStore(2, x, b_.Add(b_.Load(0, ScalarType::kF32, {x}),
                                                         b_.Load(1, ScalarType::kF32, {x}))));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> a(n), bb(n), c(n);
  for (int64_t k = 0; k < n; ++k) {
    a[k] = k * 0.5f;
    bb[k] = 3.0f - k;
  }
  void* args[] = {a.data(), bb.data(), c.data()};
  kernel->fn()(args);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(c[k], a[k] + bb[k]) << k;
}

TEST_F(CodegenTest, ParallelMatmulWithReduceMatchesTripleLoop) {
  const int64_t m = 37, k = 19, n = 23;
  LoopFunction fn;
  fn.name = "matmul";
  fn.buffers = {{"x", ScalarType::kF32, m * k}, {"w", ScalarType::kF32, k * n},
                {"y", ScalarType::kF32, m * n}};
  fn.num_params = 3;
  te::Var i = b_.NewVar("i", m), j = b_.NewVar("j", n), r = b_.NewVar("r", k);
  Expr xi = b_.Add(b_.Mul(b_.Ref(i), b_.Int(k)), b_.Ref(r));
  Expr wi = b_.Add(b_.Mul(b_.Ref(r), b_.Int(n)), b_.Ref(j));
  Expr sum = b_.Reduce(te::ReduceOp::kSum, {r},
                       b_.Mul(b_.Load(0, ScalarType::kF32, {xi}), b_.Load(1, ScalarType::kF32, {wi})));
  Expr yi = b_.Add(b_.Mul(b_.Ref(i), b_.Int(n)), b_.Ref(j));
  fn.body = lower::MakeFor(
      i, ForKind::kParallel,
      lower::MakeFor(j, ForKind::kVectorized, lower::MakeStore(2, yi, sum)));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> x(m * k), w(k * n), y(m * n), want(m * n, 0);
  for (size_t q = 0; q < x.size(); ++q) x[q] = std::sin(q * 0.1f);
  for (size_t q = 0; q < w.size(); ++q) w[q] = std::cos(q * 0.3f);
  for (int64_t a = 0; a < m; ++a)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t q = 0; q < k; ++q) want[a * n + c] += x[a * k + q] * w[q * n + c];
  void* args[] = {x.data(), w.data(), y.data()};
  kernel->fn()(args);
  for (size_t q = 0; q < y.size(); ++q) ASSERT_NEAR(y[q], want[q], 1e-4) << q;
}

TEST_F(CodegenTest, TemporaryBufferFeedsSecondStage) {
  // tmp[i] = max_j x[i, j]; y[i, j] = x[i, j] - tmp[i].
  const int64_t rows = 5, cols = 7;
  LoopFunction fn;
  fn.name = "rowmax_sub";
  fn.buffers = {{"x", ScalarType::kF32, rows * cols}, {"y", ScalarType::kF32, rows * cols},
                {"tmp", ScalarType::kF32, rows}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", rows), j = b_.NewVar("j", cols), r = b_.NewVar("r", cols);
  Expr xr = b_.Load(0, ScalarType::kF32, {b_.Add(b_.Mul(b_.Ref(i), b_.Int(cols)), b_.Ref(r))});
  Expr flat = b_.Add(b_.Mul(b_.Ref(i), b_.Int(cols)), b_.Ref(j));
  fn.body = lower::MakeSeq(
      {lower::MakeFor(i, ForKind::kSerial,
                      lower::MakeStore(2, b_.Ref(i), b_.Reduce(te::ReduceOp::kMax, {r}, xr))),
       lower::MakeFor(i, ForKind::kSerial,
                      lower::MakeFor(j, ForKind::kVectorized,
                                     lower::MakeStore(1, flat,
                                                      b_.Sub(b_.Load(0, ScalarType::kF32, {flat}),
                                                             b_.Load(2, ScalarType::kF32,
                                                                     {b_.Ref(i)})))))});
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> x(rows * cols), y(rows * cols);
  for (size_t q = 0; q < x.size(); ++q) x[q] = static_cast<float>((q * 7) % 11) - 5;
  void* args[] = {x.data(), y.data()};
  kernel->fn()(args);
  for (int64_t a = 0; a < rows; ++a) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[a * cols + c]);
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(y[a * cols + c], x[a * cols + c] - mx);
  }
}

TEST_F(CodegenTest, TranscendentalsMatchLibm) {
  const int64_t n = 64;
  LoopFunction fn;
  fn.name = "transcendentals";
  fn.buffers = {{"x", ScalarType::kF32, n}, {"e", ScalarType::kF32, n},
                {"t", ScalarType::kF32, n}, {"r", ScalarType::kF32, n}};
  fn.num_params = 4;
  te::Var i = b_.NewVar("i", n);
  Expr in = b_.Load(0, ScalarType::kF32, {b_.Ref(i)});
  fn.body = lower::MakeFor(
      i, ForKind::kVectorized,
      lower::MakeSeq({lower::MakeStore(1, b_.Ref(i), b_.Unary(te::UnaryOp::kExp, in)),
                      lower::MakeStore(2, b_.Ref(i), b_.Unary(te::UnaryOp::kTanh, in)),
                      lower::MakeStore(3, b_.Ref(i), b_.Unary(te::UnaryOp::kErf, in))}));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> x(n), e(n), t(n), r(n);
  for (int64_t q = 0; q < n; ++q) x[q] = -4.0f + q * 0.125f;
  void* args[] = {x.data(), e.data(), t.data(), r.data()};
  kernel->fn()(args);
  for (int64_t q = 0; q < n; ++q) {
    EXPECT_NEAR(e[q], std::exp(x[q]), 1e-5 * std::exp(x[q]));
    EXPECT_NEAR(t[q], std::tanh(x[q]), 1e-6);
    EXPECT_NEAR(r[q], std::erf(x[q]), 1e-6);
  }
}

// exp is emitted inline (no libm call): across its whole float range,
// vector lanes and the scalar tail, it stays within a few ulp of libm, gives
// denormals, inf past the top, zero past the bottom, and passes NaN through.
TEST_F(CodegenTest, ExpMatchesLibmOverTheWholeFloatRange) {
  std::vector<float> x;
  for (float v = -110.0f; v < 95.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-8f, -1e-8f, 88.72f, 88.73f, -87.4f, -103.9f, -104.1f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  LoopFunction fn;
  fn.name = "exp";
  fn.buffers = {{"x", ScalarType::kF32, n}, {"e", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", n);
  fn.body = lower::MakeFor(
      i, ForKind::kVectorized,
      lower::MakeStore(1, b_.Ref(i),
                       b_.Unary(te::UnaryOp::kExp, b_.Load(0, ScalarType::kF32, {b_.Ref(i)}))));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> e(n);
  void* args[] = {x.data(), e.data()};
  kernel->fn()(args);
  for (int64_t q = 0; q < n; ++q) {
    const float want = std::exp(x[q]);
    SCOPED_TRACE(::testing::Message() << "exp(" << x[q] << ")");
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(e[q])) << e[q];
    } else if (std::isinf(want) || want == 0) {
      EXPECT_EQ(e[q], want);
    } else if (want < std::numeric_limits<float>::min()) {
      EXPECT_NEAR(e[q], want, 2 * std::numeric_limits<float>::denorm_min());
    } else {
      EXPECT_NEAR(e[q], want, 4 * std::numeric_limits<float>::epsilon() * want);
    }
  }
}

// erf and tanh are emitted inline for floats (libm's erff and tanhf are
// scalar calls, one per lane; none is left): over [-10, 10], vector lanes and the scalar
// tail, each within a few ulp of the double-precision value (erf: 7, its
// float error peaks at 5.8 near |x| = 4.05, see the next test; tanh: 3),
// exactly +-1 far out, signed zeros kept, NaN passed through.
TEST_F(CodegenTest, ErfAndTanhMatchDoublePrecision) {
  std::vector<float> x;
  for (float v = -10.0f; v < 10.0f; v += 0.00371f) x.push_back(v);
  for (float v :
       {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-5f, 0.6249f, 0.625f, 0.6251f, -0.625f, 3.74f, -3.999f,
        4.0f, 4.001f, 9.5f, 88.0f, -100.0f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  LoopFunction fn;
  fn.name = "erf_tanh";
  fn.buffers = {
      {"x", ScalarType::kF32, n}, {"erf", ScalarType::kF32, n}, {"tanh", ScalarType::kF32, n}};
  fn.num_params = 3;
  te::Var i = b_.NewVar("i", n);
  Expr in = b_.Load(0, ScalarType::kF32, {b_.Ref(i)});
  fn.body = lower::MakeFor(
      i, ForKind::kVectorized,
      lower::MakeSeq({lower::MakeStore(1, b_.Ref(i), b_.Unary(te::UnaryOp::kErf, in)),
                      lower::MakeStore(2, b_.Ref(i), b_.Unary(te::UnaryOp::kTanh, in))}));
  // Inline: no call into libm (which took one call per vector lane).
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("@erff")));
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("@tanhf")));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> erf(n), tanh(n);
  void* args[] = {x.data(), erf.data(), tanh.data()};
  kernel->fn()(args);
  auto check = [](float got, double want, double ulps) {
    const float w = static_cast<float>(want);
    if (std::isnan(want)) return std::isnan(got);
    if (want == 0) return got == 0 && std::signbit(got) == std::signbit(w);
    const double ulp =
        std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
    return std::fabs(got - want) <= ulps * ulp;
  };
  for (int64_t q = 0; q < n; ++q) {
    const double v = x[q];
    EXPECT_TRUE(check(erf[q], std::erf(v), 7))
        << "erf(" << x[q] << ") = " << erf[q] << ", want " << std::erf(v);
    EXPECT_TRUE(check(tanh[q], std::tanh(v), 3))
        << "tanh(" << x[q] << ") = " << tanh[q] << ", want " << std::tanh(v);
    if (std::fabs(v) >= 9.5) {
      EXPECT_EQ(std::fabs(erf[q]), 1.0f) << x[q];
      EXPECT_EQ(std::fabs(tanh[q]), 1.0f) << x[q];
    }
  }
}

// erf against float64 over a dense sweep of [-5, 5] (vector lanes and the
// scalar tail) and specials: within 6 ulp (every float32 measured: 5.8 at
// most, near |x| = 4.05), counting ulps below 1 once erf rounds to 1; never
// outside [-1, 1]; exactly +-1 from 4.5 on (every float: from 4.36), as
// past the input clamp (4.8); odd; signed zeros and NaN kept.
TEST_F(CodegenTest, ErfStaysWithinSixUlpOfFloat64AndInsideMinusOneToOne) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int k = -50000; k <= 50000; ++k) x.push_back(static_cast<float>(k) * 1e-4f);
  for (float v : {0.0f, -0.0f, 1e-38f, -1e-45f, 1e-7f, 3.73718476f, 3.87f, 4.0f, 4.04525232f, 4.2f,
                  4.8f, std::nextafter(4.8f, 0.0f), std::nextafter(4.8f, inf), 5.5f, 1e30f, inf,
                  -inf, std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
    x.push_back(-v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  LoopFunction fn;
  fn.name = "erf_sweep";
  fn.buffers = {{"x", ScalarType::kF32, n}, {"erf", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", n);
  fn.body = lower::MakeFor(
      i, ForKind::kVectorized,
      lower::MakeStore(1, b_.Ref(i),
                       b_.Unary(te::UnaryOp::kErf, b_.Load(0, ScalarType::kF32, {b_.Ref(i)}))));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> y(n);
  void* args[] = {x.data(), y.data()};
  kernel->fn()(args);
  for (int64_t q = 0; q < n; ++q) {
    SCOPED_TRACE(::testing::Message() << "erf(" << x[q] << ") = " << y[q]);
    const double want = std::erf(static_cast<double>(x[q]));
    if (std::isnan(x[q])) {
      EXPECT_TRUE(std::isnan(y[q]));
      continue;
    }
    EXPECT_LE(std::fabs(y[q]), 1.0f);
    if (want == 0) {
      EXPECT_EQ(y[q], 0.0f);
      EXPECT_EQ(std::signbit(y[q]), std::signbit(x[q]));
      continue;
    }
    const float w = std::fabs(static_cast<float>(want));
    const double ulp = w == 1.0f ? 1.0 - std::nextafter(1.0f, 0.0f)
                                 : std::nextafter(w, inf) - static_cast<double>(w);
    EXPECT_LE(std::fabs(y[q] - want), 6 * ulp) << "want " << want;
    if (std::fabs(x[q]) >= 4.5f) EXPECT_EQ(y[q], std::copysign(1.0f, x[q]));
  }
  // Odd: lanes holding x and -x agree up to sign (the sweep is symmetric).
  for (int k = 0; k <= 50000; ++k) EXPECT_EQ(y[50000 + k], -y[50000 - k]) << k;
}

// erf of x times a constant (GELU's erf(x * M_SQRT1_2)) folds the constant
// into erf's coefficients within [1/16, 16]; outside that it multiplies
// first. Either way within 6 ulp of float64's erf(x * k), +-1 where k x is
// past 4.5, NaN for NaN, and odd in x.
TEST_F(CodegenTest, ErfOfScaledInputStaysWithinSixUlp) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float k : {0.70710677f, -2.5f, 16.0f, 0.0625f, 1.3f, 40.0f}) {
    SCOPED_TRACE(::testing::Message() << "scale " << k);
    std::vector<float> x;
    for (int q = -50000; q <= 50000; ++q)
      x.push_back(static_cast<float>(q) * 1e-4f * 6 / std::fabs(k));
    for (float v :
         {0.0f, 1e-38f, 4.8f / std::fabs(k), 1e30f, inf, std::numeric_limits<float>::quiet_NaN()}) {
      x.push_back(v);
      x.push_back(-v);
    }
    const int64_t n = static_cast<int64_t>(x.size());
    LoopFunction fn;
    fn.name = "erf_scaled";
    fn.buffers = {{"x", ScalarType::kF32, n}, {"erf", ScalarType::kF32, n}};
    fn.num_params = 2;
    te::Var i = b_.NewVar("i", n);
    Expr scaled = b_.Mul(b_.Load(0, ScalarType::kF32, {b_.Ref(i)}), b_.Float(k));
    fn.body = lower::MakeFor(i, ForKind::kVectorized,
                             lower::MakeStore(1, b_.Ref(i), b_.Unary(te::UnaryOp::kErf, scaled)));
    auto kernel = Build(fn);
    ASSERT_NE(kernel, nullptr);
    std::vector<float> y(n);
    void* args[] = {x.data(), y.data()};
    kernel->fn()(args);
    double worst = 0;
    for (int64_t q = 0; q < n; ++q) {
      SCOPED_TRACE(::testing::Message() << "erf(" << x[q] << " * k) = " << y[q]);
      const double kx = static_cast<double>(x[q]) * k;
      if (std::isnan(x[q])) {
        EXPECT_TRUE(std::isnan(y[q]));
        continue;
      }
      const double want = std::erf(kx);
      EXPECT_LE(std::fabs(y[q]), 1.0f);
      if (want == 0) {
        EXPECT_EQ(y[q], 0.0f);
        continue;
      }
      const float w = std::fabs(static_cast<float>(want));
      const double ulp = w == 1.0f ? 1.0 - std::nextafter(1.0f, 0.0f)
                                   : std::nextafter(w, inf) - static_cast<double>(w);
      worst = std::max(worst, std::fabs(y[q] - want) / ulp);
      EXPECT_LE(std::fabs(y[q] - want), 6 * ulp) << "want " << want;
      if (std::fabs(kx) >= 4.5) EXPECT_EQ(y[q], std::copysign(1.0f, static_cast<float>(kx)));
    }
    for (int q = 0; q <= 50000; ++q) EXPECT_EQ(y[50000 + q], -y[50000 - q]) << q;
    std::cout << "scale " << k << ": at most " << worst << " ulp\n";
  }
}

TEST_F(CodegenTest, Int64ArithmeticAndCasts) {
  const int64_t n = 10;
  LoopFunction fn;
  fn.name = "ints";
  fn.buffers = {{"a", ScalarType::kI64, n}, {"f", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", n);
  Expr a = b_.Load(0, ScalarType::kI64, {b_.Ref(i)});
  // f = float((a * 3) % 7) / 2
  fn.body = lower::MakeFor(
      i, ForKind::kSerial,
      lower::MakeStore(1, b_.Ref(i),
                       b_.Div(b_.Cast(ScalarType::kF32, b_.Mod(b_.Mul(a, b_.Int(3)), b_.Int(7))),
                              b_.Float(2))));
  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<int64_t> av(n);
  std::vector<float> f(n);
  for (int64_t q = 0; q < n; ++q) av[q] = q * 5 + 1;
  void* args[] = {av.data(), f.data()};
  kernel->fn()(args);
  for (int64_t q = 0; q < n; ++q) EXPECT_EQ(f[q], static_cast<float>((av[q] * 3) % 7) / 2);
}

// A requantising store, uint8 of clip(round(x), lo, hi): the clip's bounds
// inside int32 let the conversion be a plain int32 one of 16 lanes (LLVM
// scalarises the saturating one), and it must equal the int64 conversion
// (truncate, NaN to 0) then the byte's wrap for every float, NaN and
// infinities included. Bounds beyond int32 keep the saturating int64
// conversion.
TEST_F(CodegenTest, ClippedFloatToIntegerStoresMatchTheInt64Conversion) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::nanf(""), -inf, inf, -1e10f, 1e10f, -3e9f, 3e9f, -0.5f, 0.5f, -1,
                          0, 1, 127.5f, 128.5f, 254.5f, 255, 255.5f, 256, 300, -129, 2147483520.0f};
  for (int i = 0; i < 200; ++i) x.push_back(static_cast<float>(i * 37 % 601) * 0.75f - 150);
  const int64_t n = static_cast<int64_t>(x.size());
  struct Case {
    double low, high;
    DType storage;
    const char* conversion;  // in the optimised IR: 16 lanes, or 8 of int64
  };
  for (const Case& c : {Case{0, 255, DType::kUInt8, "fptosi <16 x float>"},
                        Case{-128, 127, DType::kInt8, "fptosi <16 x float>"},
                        Case{-4e9, 4e9, DType::kInt64, "fptosi.sat.v8i64.v8f32"}}) {
    SCOPED_TRACE(c.high);
    LoopFunction fn;
    fn.name = "requantise";
    fn.buffers = {{"x", ScalarType::kF32, n}, {"q", ScalarType::kI64, n}};
    if (c.storage != DType::kInt64) fn.buffers[1].storage = c.storage;
    fn.num_params = 2;
    te::Var i = b_.NewVar("i", n);
    Expr v = b_.Unary(te::UnaryOp::kRound, b_.Load(0, ScalarType::kF32, {b_.Ref(i)}));
    v = b_.Min(b_.Max(v, b_.Float(c.low)), b_.Float(c.high));
    fn.body = lower::MakeFor(i, ForKind::kVectorized,
                             lower::MakeStore(1, b_.Ref(i), b_.Cast(ScalarType::kI64, v)));
    bool avx512 = false;
    for (const std::string& f : codegen::GetHostTarget().features) avx512 |= f == "+avx512f";
    if (avx512) {
      auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
      ASSERT_TRUE(ir.ok()) << ir.status();
      EXPECT_THAT(*ir, ::testing::HasSubstr(c.conversion));
      if (c.storage != DType::kInt64) {
        EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("fptosi.sat")));
      }
    }
    auto kernel = Build(fn);
    ASSERT_NE(kernel, nullptr);
    std::vector<int64_t> q(n, -7);
    void* args[] = {x.data(), q.data()};
    kernel->fn()(args);
    // The int64 conversion of the clipped value, then the storage's wrap.
    for (int64_t k = 0; k < n; ++k) {
      const double clipped =
          std::isnan(x[k]) ? 0 : std::fmin(std::fmax(std::nearbyint(x[k]), c.low), c.high);
      const int64_t want = static_cast<int64_t>(clipped);
      switch (c.storage) {
        case DType::kUInt8: {
          uint8_t got;
          std::memcpy(&got, reinterpret_cast<const uint8_t*>(q.data()) + k, 1);
          ASSERT_EQ(got, static_cast<uint8_t>(want)) << x[k];
          break;
        }
        case DType::kInt8: {
          int8_t got;
          std::memcpy(&got, reinterpret_cast<const uint8_t*>(q.data()) + k, 1);
          ASSERT_EQ(got, static_cast<int8_t>(want)) << x[k];
          break;
        }
        default:
          ASSERT_EQ(q[k], want) << x[k];
      }
    }
  }
}

TEST_F(CodegenTest, VectorizedLoopUses512BitVectorsOnAvx512) {
  bool avx512 = false;
  for (const std::string& f : codegen::GetHostTarget().features) avx512 |= f == "+avx512f";
  if (!avx512) GTEST_SKIP() << "host has no AVX-512";
  LoopFunction fn;
  fn.name = "scale";
  const int64_t n = 4096;
  fn.buffers = {{"a", ScalarType::kF32, n}, {"b", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", n);
  fn.body = lower::MakeFor(i, ForKind::kVectorized,
                           lower::MakeStore(1, b_.Ref(i),
                                            b_.Mul(b_.Load(0, ScalarType::kF32, {b_.Ref(i)}),
                                                   b_.Float(3))));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::HasSubstr("<16 x float>"));
}

// A prefetch into L2 is llvm.prefetch with locality 2; one into L1 too, 3.
// Both leave the stores around them as they were.
TEST_F(CodegenTest, PrefetchesIntoL2AndIntoL1) {
  LoopFunction fn;
  fn.name = "copy_with_prefetches";
  const int64_t n = 256;
  fn.buffers = {{"a", ScalarType::kF32, n}, {"b", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var i = b_.NewVar("i", n);
  fn.body = lower::MakeFor(
      i, ForKind::kSerial,
      lower::MakeSeq({lower::MakePrefetch(0, b_.Add(b_.Ref(i), b_.Int(64))),
                      lower::MakePrefetch(0, b_.Add(b_.Ref(i), b_.Int(16)), /*into_l1=*/true),
                      lower::MakeStore(1, b_.Ref(i), b_.Load(0, ScalarType::kF32, {b_.Ref(i)}))}));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  const std::string call = "llvm.prefetch.p0\\(ptr [^,]*, i32 0, i32 ";
  EXPECT_THAT(*ir, ::testing::ContainsRegex(call + "2, i32 1\\)"));
  EXPECT_THAT(*ir, ::testing::ContainsRegex(call + "3, i32 1\\)"));
}

// A channel-lanes conv's store: a tile of 6 rows (pixels) x 2 blocks of 16
// lanes (channels), each lane a plane of `pixels` apart in the output. 27
// pixels leave the last tile 3 rows short and 29 channels the second block
// 3 lanes short; their values would read past `in` and `bias`, and their
// stores would land past `out`, whose guard elements must stay untouched.
// The store happens only when kc == 0, a condition on neither rows nor
// lanes. Codegen emits it as a transpose and masked stores, not scatters.
TEST_F(CodegenTest, StridedTileStoreMatchesLoopWithoutScatters) {
  const int64_t pixels = 27, channels = 29, width = 32, guard = 64;
  const int64_t tiles = (pixels + 5) / 6;
  LoopFunction fn;
  fn.name = "tile_store";
  fn.buffers = {{"in", ScalarType::kF32, pixels * width},
                {"bias", ScalarType::kF32, channels},
                {"out", ScalarType::kF32, channels * pixels}};
  fn.num_params = 3;
  te::Var kc = b_.NewVar("kc", 2), ib = b_.NewVar("ib", tiles), r = b_.NewVar("r", 6),
          vv = b_.NewVar("vv", 2), v = b_.NewVar("v", 16);
  Expr pixel = b_.Add(b_.Mul(b_.Ref(ib), b_.Int(6)), b_.Ref(r));
  Expr channel = b_.Add(b_.Mul(b_.Ref(vv), b_.Int(16)), b_.Ref(v));
  Expr value = b_.Add(
      b_.Add(b_.Mul(b_.Load(0, ScalarType::kF32, {b_.Add(b_.Mul(pixel, b_.Int(width)), channel)}),
                    b_.Float(2)),
             b_.Load(1, ScalarType::kF32, {channel})),
      b_.Mul(b_.Cast(ScalarType::kF32, b_.Ref(kc)), b_.Float(100)));
  Expr predicate =
      b_.Binary(te::BinaryOp::kAnd,
                b_.Binary(te::BinaryOp::kAnd, b_.Compare(te::CompareOp::kLT, pixel, b_.Int(pixels)),
                          b_.Compare(te::CompareOp::kLT, channel, b_.Int(channels))),
                b_.Compare(te::CompareOp::kEQ, b_.Ref(kc), b_.Int(0)));
  Expr out_index = b_.Add(b_.Mul(channel, b_.Int(pixels)), pixel);
  fn.body = lower::MakeFor(
      kc, ForKind::kSerial,
      lower::MakeFor(
          ib, ForKind::kSerial,
          lower::MakeFor(
              r, ForKind::kUnrolled,
              lower::MakeFor(vv, ForKind::kUnrolled,
                             lower::MakeFor(v, ForKind::kVector,
                                            lower::MakeStore(2, out_index, value, predicate))))));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("scatter")));
  EXPECT_THAT(*ir, ::testing::HasSubstr("masked.store"));

  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> in(pixels * width), bias(channels);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 97) * 0.25f - 7;
  for (int64_t c = 0; c < channels; ++c) bias[c] = 1000.0f * (c + 1);
  const float sentinel = -12345;
  std::vector<float> out(channels * pixels + guard, sentinel);
  void* args[] = {in.data(), bias.data(), out.data()};
  kernel->fn()(args);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < pixels; ++p) {
      ASSERT_EQ(out[c * pixels + p], in[p * width + c] * 2 + bias[c]) << c << " " << p;
    }
  }
  for (int64_t g = 0; g < guard; ++g) ASSERT_EQ(out[channels * pixels + g], sentinel) << g;
}

// Loads that step by 2 and 3 elements along a vector loop's lanes, in blocks
// of 16 with the last block 11 lanes short: wide masked loads and shuffles,
// no gathers, the same values as the loop.
TEST_F(CodegenTest, StridedLoadsInVectorBlocksMatchLoopWithoutGathers) {
  const int64_t n = 37, blocks = 3;
  LoopFunction fn;
  fn.name = "strided_loads";
  fn.buffers = {{"in", ScalarType::kF32, 3 * (n - 1) + 1}, {"out", ScalarType::kF32, n}};
  fn.num_params = 2;
  te::Var xb = b_.NewVar("xb", blocks), v = b_.NewVar("v", 16);
  Expr x = b_.Add(b_.Mul(b_.Ref(xb), b_.Int(16)), b_.Ref(v));
  Expr value = b_.Sub(b_.Load(0, ScalarType::kF32, {b_.Add(b_.Mul(x, b_.Int(2)), b_.Int(1))}),
                      b_.Load(0, ScalarType::kF32, {b_.Mul(x, b_.Int(3))}));
  fn.body = lower::MakeFor(
      xb, ForKind::kSerial,
      lower::MakeFor(v, ForKind::kVector,
                     lower::MakeStore(1, x, value, b_.Compare(te::CompareOp::kLT, x, b_.Int(n)))));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("gather")));

  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> in(3 * (n - 1) + 1), out(n, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * i % 101);
  void* args[] = {in.data(), out.data()};
  kernel->fn()(args);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[2 * i + 1] - in[3 * i]) << i;
}

// A grouped conv's input read: lane v takes element (v / w) * w + j of a
// 16-element line. From a buffer of whole lines (the line loaded once and
// permuted) and from one that ends mid-line (only the elements read are
// loaded, so the last line's read stays inside it): never a gather.
TEST_F(CodegenTest, LaneWindowLoadsMatchLoopWithoutGathers) {
  const int64_t lines = 3, w = 8, w_odd = 4, shift = 3;
  // Not whole lines: the last line's last read, element 50, ends the buffer.
  const int64_t odd_size = (lines - 1) * 16 + shift + 16;
  LoopFunction fn;
  fn.name = "lane_windows";
  fn.buffers = {{"in", ScalarType::kF32, lines * 16},
                {"odd", ScalarType::kF32, odd_size},
                {"out", ScalarType::kF32, lines * w * 16},
                {"out_odd", ScalarType::kF32, lines * w_odd * 16}};
  fn.num_params = 4;
  te::Var t = b_.NewVar("t", lines), j = b_.NewVar("j", w), k = b_.NewVar("k", w_odd);
  te::Var v = b_.NewVar("v", 16), u = b_.NewVar("u", 16);
  auto lane = [&](const te::Var& l, int64_t width, const te::Var& r) {
    return b_.Add(b_.Mul(b_.Div(b_.Ref(l), b_.Int(width)), b_.Int(width)), b_.Ref(r));
  };
  Expr line = b_.Mul(b_.Ref(t), b_.Int(16));
  lower::Stmt whole = lower::MakeFor(
      j, ForKind::kUnrolled,
      lower::MakeFor(v, ForKind::kVector,
                     lower::MakeStore(
                         2,
                         b_.Add(b_.Mul(b_.Add(b_.Mul(b_.Ref(t), b_.Int(w)), b_.Ref(j)), b_.Int(16)),
                                b_.Ref(v)),
                         b_.Load(0, ScalarType::kF32, {b_.Add(line, lane(v, w, j))}))));
  lower::Stmt odd = lower::MakeFor(
      k, ForKind::kUnrolled,
      lower::MakeFor(
          u, ForKind::kVector,
          lower::MakeStore(
              3,
              b_.Add(b_.Mul(b_.Add(b_.Mul(b_.Ref(t), b_.Int(w_odd)), b_.Ref(k)), b_.Int(16)),
                     b_.Ref(u)),
              b_.Load(1, ScalarType::kF32,
                      {b_.Add(b_.Add(line, b_.Int(shift)), lane(u, w_odd, k))}))));
  fn.body = lower::MakeFor(t, ForKind::kSerial, lower::MakeSeq({whole, odd}));
  auto ir = codegen::EmitOptimizedIR(fn, codegen::CodegenOptions{});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, ::testing::Not(::testing::HasSubstr("gather")));

  auto kernel = Build(fn);
  ASSERT_NE(kernel, nullptr);
  std::vector<float> in(lines * 16), odd_in(odd_size), out(lines * w * 16, -1),
      out_odd(lines * w_odd * 16, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * 7 % 101);
  for (size_t i = 0; i < odd_in.size(); ++i) odd_in[i] = static_cast<float>(i * 5 % 97);
  void* args[] = {in.data(), odd_in.data(), out.data(), out_odd.data()};
  kernel->fn()(args);
  for (int64_t tt = 0; tt < lines; ++tt) {
    for (int64_t l = 0; l < 16; ++l) {
      for (int64_t jj = 0; jj < w; ++jj) {
        ASSERT_EQ(out[(tt * w + jj) * 16 + l], in[tt * 16 + l / w * w + jj]) << tt << " " << l;
      }
      for (int64_t kk = 0; kk < w_odd; ++kk) {
        ASSERT_EQ(out_odd[(tt * w_odd + kk) * 16 + l],
                  odd_in[tt * 16 + shift + l / w_odd * w_odd + kk])
            << tt << " " << l;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
