#include "compiler/passes/fuse_attention.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir/printer.h"
#include "compiler/passes/infer_type.h"
#include "engine/model_manager.h"
#include "gtest/gtest.h"
#include "tests/test_util/graph_building.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatValues;
using ::kiln::testing::Op;
using runtime::Tensor;

constexpr float kInf = std::numeric_limits<float>::infinity();

absl::StatusOr<bool> RunPass(Graph& g, bool avx512 = true) {
  return CreateFuseAttentionPassForTest(avx512)->Run(g, PassContext{});
}

Node* Scalar(Graph& g, float v) {
  static int counter = 0;
  return g.AddConstant(absl::StrCat("c", counter++), FloatValues({}, {v}));
}

enum class Mask { kNone, kPadding, kCausal };

struct Case {
  int64_t b = 2, h = 4, s = 16, d = 32;
  Mask mask = Mask::kNone;
};

// Heads as their own inputs (B, H, S, D), as a graph states attention
// directly: softmax(q k^T / sqrt(d) + mask) v, the padding mask an input
// (B, 1, 1, S) added, the causal one a where over a constant condition.
Graph HeadsGraph(const Case& c) {
  Graph g;
  const TensorType heads{DType::kFloat32, {c.b, c.h, c.s, c.d}};
  Node* q = g.AddInput("q", heads);
  Node* k = g.AddInput("k", heads);
  Node* v = g.AddInput("v", heads);
  Node* kt = Op(g, "transpose", {k}, TransposeAttrs{{0, 1, 3, 2}});
  Node* scores = Op(g, "matmul", {q, kt});
  scores = Op(g, "div", {scores, Scalar(g, std::sqrt(static_cast<float>(c.d)))});
  if (c.mask == Mask::kPadding) {
    Node* mask = g.AddInput("mask", {DType::kFloat32, {c.b, 1, 1, c.s}});
    scores = Op(g, "add", {scores, mask});
  } else if (c.mask == Mask::kCausal) {
    auto cond = std::make_shared<ConstantData>();
    cond->type = TensorType{DType::kBool, {c.s, c.s}};
    std::string bytes(c.s * c.s, '\0');
    for (int64_t i = 0; i < c.s; ++i) {
      for (int64_t j = i + 1; j < c.s; ++j) bytes[i * c.s + j] = 1;
    }
    cond->bytes = ConstantBytes(std::move(bytes));
    scores = Op(g, "where", {g.AddConstant("causal", cond), Scalar(g, -kInf), scores});
  }
  Node* p = Op(g, "softmax", {scores}, AxisAttrs{-1});
  g.AddOutput(Op(g, "matmul", {p, v}));
  EXPECT_TRUE(InferTypes(g).ok());
  return g;
}

// PyTorch's nn.MultiheadAttention as it exports (sequence first): one input
// (S, B, 3E), the fused QKV projection's output, sliced into q, k and v,
// each reshaped to (S, B * H, Dh) and transposed to (B * H, S, Dh); q
// divided by sqrt(Dh) before q k^T, k transposed to (B * H, Dh, S). With
// `merge` the heads are merged back as PyTorch does before the output
// projection: transposed to (S, B * H, Dh) and reshaped to (S * B, E).
Graph FusedQkvGraph(int64_t s, int64_t b, int64_t h, int64_t dh, bool merge = false) {
  Graph g;
  const int64_t e = h * dh;
  Node* x = g.AddInput("qkv", {DType::kFloat32, {s, b, 3 * e}});
  auto head = [&](int64_t i, std::vector<int64_t> perm) {
    SliceAttrs a{{0, 0, i * e}, {1, 1, 1}, {s, b, e}};
    Node* part = Op(g, "slice", {x}, a);
    Node* split = Op(g, "reshape", {part}, ReshapeAttrs{{s, b * h, dh}});
    return Op(g, "transpose", {split}, TransposeAttrs{perm});
  };
  Node* q = Op(g, "div", {head(0, {1, 0, 2}), Scalar(g, std::sqrt(static_cast<float>(dh)))});
  Node* scores = Op(g, "matmul", {q, head(1, {1, 2, 0})});
  Node* p = Op(g, "softmax", {scores}, AxisAttrs{-1});
  Node* y = Op(g, "matmul", {p, head(2, {1, 0, 2})});
  if (merge) {
    y = Op(g, "transpose", {y}, TransposeAttrs{{1, 0, 2}});
    y = Op(g, "reshape", {y}, ReshapeAttrs{{s * b, e}});
  }
  g.AddOutput(y);
  EXPECT_TRUE(InferTypes(g).ok());
  return g;
}

TEST(FuseAttentionTest, MakesScaledMaskedAttentionOneOp) {
  Case c;
  c.mask = Mask::kPadding;
  Graph g = HeadsGraph(c);
  absl::StatusOr<bool> changed = RunPass(g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed);
  const Node* att = g.outputs()[0];
  ASSERT_EQ(att->op_name(), "attention") << PrintGraph(g);
  ASSERT_EQ(att->inputs.size(), 4u);
  EXPECT_EQ(att->inputs[0]->name, "q");
  EXPECT_EQ(att->inputs[1]->name, "k");  // read through the transpose
  EXPECT_EQ(att->inputs[2]->name, "v");
  EXPECT_EQ(att->inputs[3]->name, "mask");
  const AttentionAttrs& a = std::get<AttentionAttrs>(att->attrs);
  EXPECT_FLOAT_EQ(a.scale, 1 / std::sqrt(32.0f));
  EXPECT_EQ(a.n1, 2);  // the mask splits the entries as (batch, head)
  EXPECT_EQ(a.n2, 4);
  EXPECT_EQ(a.s, 16);
  EXPECT_EQ(a.t, 16);
  EXPECT_EQ(a.d, 32);
  EXPECT_EQ(a.k.row, 32);  // k's rows, not k^T's
  // Entry (b, h) of the mask is row b's, whatever the head.
  EXPECT_EQ(a.mask.row, 0);
  EXPECT_EQ(a.mask.s1, 16);
  EXPECT_EQ(a.mask.s2, 0);
  EXPECT_EQ(att->type, (TensorType{DType::kFloat32, {2, 4, 16, 32}}));
}

TEST(FuseAttentionTest, ReadsAFusedQkvProjectionInPlace) {
  const int64_t s = 10, b = 2, h = 4, dh = 8, e = h * dh;
  Graph g = FusedQkvGraph(s, b, h, dh);
  absl::StatusOr<bool> changed = RunPass(g);
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* att = g.outputs()[0];
  ASSERT_EQ(att->op_name(), "attention") << PrintGraph(g);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(att->inputs[i]->name, "qkv");
  const AttentionAttrs& a = std::get<AttentionAttrs>(att->attrs);
  EXPECT_EQ(a.n1, b);
  EXPECT_EQ(a.n2, h);
  EXPECT_FLOAT_EQ(a.scale, 1 / std::sqrt(8.0f));
  // Head (bi, hi)'s row si of q is qkv[si, bi, hi * dh ...].
  for (const auto& [view, offset] :
       {std::pair{a.q, int64_t{0}}, std::pair{a.k, e}, std::pair{a.v, 2 * e}}) {
    EXPECT_EQ(view.offset, offset);
    EXPECT_EQ(view.s1, 3 * e);
    EXPECT_EQ(view.s2, dh);
    EXPECT_EQ(view.row, b * 3 * e);
  }
  // The slices, reshapes and transposes are gone: nothing copies the heads.
  for (const Node* n : g.TopologicalOrder()) {
    EXPECT_TRUE(!n->is_op() || n->op_name() == "attention") << n->op_name();
  }
  // Row-major output.
  EXPECT_EQ(a.out.s1, h * s * dh);
  EXPECT_EQ(a.out.s2, s * dh);
  EXPECT_EQ(a.out.row, dh);
}

TEST(FuseAttentionTest, WritesRowsWhereTheHeadMergePutsThem) {
  const int64_t s = 10, b = 2, h = 4, dh = 8, e = h * dh;
  Graph g = FusedQkvGraph(s, b, h, dh, /*merge=*/true);
  absl::StatusOr<bool> changed = RunPass(g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed);
  const Node* att = g.outputs()[0];
  ASSERT_EQ(att->op_name(), "attention") << PrintGraph(g);
  EXPECT_EQ(att->type, (TensorType{DType::kFloat32, {s * b, e}}));
  const AttentionAttrs& a = std::get<AttentionAttrs>(att->attrs);
  // Head (bi, hi)'s row si lands at (si * b + bi, hi * dh).
  EXPECT_EQ(a.out.s1, e);
  EXPECT_EQ(a.out.s2, dh);
  EXPECT_EQ(a.out.row, b * e);
}

TEST(FuseAttentionTest, CausalWhereBecomesAnAdditiveMask) {
  Case c;
  c.mask = Mask::kCausal;
  Graph g = HeadsGraph(c);
  absl::StatusOr<bool> changed = RunPass(g);
  ASSERT_TRUE(changed.ok() && *changed);
  const Node* att = g.outputs()[0];
  ASSERT_EQ(att->op_name(), "attention");
  ASSERT_EQ(att->inputs.size(), 4u);
  const Node* mask = att->inputs[3];
  ASSERT_EQ(mask->op_name(), "where");
  EXPECT_EQ(mask->inputs[0]->name, "causal");
  EXPECT_EQ(mask->type, (TensorType{DType::kFloat32, {16, 16}}));
  const AttentionAttrs& a = std::get<AttentionAttrs>(att->attrs);
  EXPECT_EQ(a.mask.s1, 0);
  EXPECT_EQ(a.mask.s2, 0);
  EXPECT_EQ(a.mask.row, 16);
}

TEST(FuseAttentionTest, LeavesWhatIsNotAttention) {
  {
    SCOPED_TRACE("no AVX-512");
    Graph g = HeadsGraph(Case{});
    absl::StatusOr<bool> changed = RunPass(g, /*avx512=*/false);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
  {
    SCOPED_TRACE("softmax over another axis");
    Graph g;
    const TensorType t{DType::kFloat32, {2, 8, 8}};
    Node* q = g.AddInput("q", t);
    Node* scores = Op(g, "matmul", {q, g.AddInput("kt", t)});
    Node* p = Op(g, "softmax", {scores}, AxisAttrs{1});
    g.AddOutput(Op(g, "matmul", {p, g.AddInput("v", t)}));
    ASSERT_TRUE(InferTypes(g).ok());
    absl::StatusOr<bool> changed = RunPass(g);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
  {
    SCOPED_TRACE("the probabilities are an output too");
    Graph g = HeadsGraph(Case{});
    Node* p = g.outputs()[0]->inputs[0];
    g.AddOutput(p);
    absl::StatusOr<bool> changed = RunPass(g);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
  {
    SCOPED_TRACE("a per-key scale is no scalar");
    Graph g;
    const TensorType t{DType::kFloat32, {2, 8, 8}};
    Node* scores = Op(g, "matmul", {g.AddInput("q", t), g.AddInput("kt", t)});
    scores = Op(g, "mul", {scores, g.AddConstant("w", FloatValues({8}, std::vector<float>(8, 2)))});
    Node* p = Op(g, "softmax", {scores}, AxisAttrs{-1});
    g.AddOutput(Op(g, "matmul", {p, g.AddInput("v", t)}));
    ASSERT_TRUE(InferTypes(g).ok());
    absl::StatusOr<bool> changed = RunPass(g);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
}

// softmax(q k^T * scale + mask) v in double, q/k/v (N, S, D) contiguous.
std::vector<float> Reference(const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, int64_t n, int64_t s, int64_t d,
                             double scale,
                             const std::function<double(int64_t, int64_t, int64_t)>& mask) {
  std::vector<float> out(n * s * d);
  std::vector<double> p(s);
  for (int64_t e = 0; e < n; ++e) {
    for (int64_t i = 0; i < s; ++i) {
      double m = -INFINITY;
      for (int64_t t = 0; t < s; ++t) {
        double dot = 0;
        for (int64_t j = 0; j < d; ++j)
          dot += double{q[(e * s + i) * d + j]} * k[(e * s + t) * d + j];
        p[t] = dot * scale + mask(e, i, t);
        m = std::max(m, p[t]);
      }
      double sum = 0;
      for (int64_t t = 0; t < s; ++t) sum += p[t] = std::exp(p[t] - m);
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < s; ++t) acc += p[t] * v[(e * s + t) * d + j];
        out[(e * s + i) * d + j] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(n);
  for (float& f : x) f = u(rng);
  return x;
}

Tensor Make(const TensorType& type, const std::vector<float>& x) {
  auto t = Tensor::FromBytes(
      type, absl::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

// The compiled model with the pass (the attention kernel) and without it
// (matmul, softmax, matmul kernels), both against the double reference:
// sizes off the kernel's tiles, head dims 32 and 64, each mask.
TEST(FuseAttentionTest, CompiledAttentionMatchesAReference) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  int models = 0;
  for (const Case& c : {Case{2, 4, 16, 32, Mask::kNone}, Case{1, 3, 37, 64, Mask::kPadding},
                        Case{2, 2, 70, 32, Mask::kCausal}, Case{1, 2, 130, 64, Mask::kPadding}}) {
    const int64_t n = c.b * c.h, elements = n * c.s * c.d;
    const std::vector<float> q = Random(elements, 1), k = Random(elements, 2),
                             v = Random(elements, 3);
    std::vector<float> pad(c.b * c.s, 0.0f);
    for (int64_t t = c.s * 3 / 4; t < c.s; ++t) pad[t] = -kInf;  // batch entry 0 is shorter
    auto mask = [&](int64_t e, int64_t i, int64_t t) -> double {
      if (c.mask == Mask::kPadding) return pad[(e / c.h) * c.s + t];
      if (c.mask == Mask::kCausal) return t > i ? -INFINITY : 0.0;
      return 0.0;
    };
    const std::vector<float> want =
        Reference(q, k, v, n, c.s, c.d, 1 / std::sqrt(static_cast<double>(c.d)), mask);
    for (bool fused : {true, false}) {
      SCOPED_TRACE(absl::StrCat("s=", c.s, " d=", c.d, " mask=", static_cast<int>(c.mask),
                                fused ? " fused" : " unfused"));
      CompileOptions options;
      if (!fused) options.disabled_passes = {"FuseAttention"};
      const std::string name = "m" + std::to_string(models++);
      auto compiled = (*manager)->Compile(name, HeadsGraph(c), options);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      bool on_kernel = false;
      for (const engine::KernelCompileReport& kernel : compiled->kernels) {
        on_kernel |= kernel.schedule.rfind("attention", 0) == 0;
      }
      __builtin_cpu_init();
      EXPECT_EQ(on_kernel, fused && __builtin_cpu_supports("avx512f"));
      const TensorType heads{DType::kFloat32, {c.b, c.h, c.s, c.d}};
      Tensor tq = Make(heads, q), tk = Make(heads, k), tv = Make(heads, v);
      Tensor tm = Make({DType::kFloat32, {c.b, 1, 1, c.s}}, pad);
      std::vector<const Tensor*> inputs{&tq, &tk, &tv};
      if (c.mask == Mask::kPadding) inputs.push_back(&tm);
      auto result = (*manager)->Find(name)->Run(inputs);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_EQ(result->outputs[0].type().NumElements(), elements);
      const float* got = static_cast<const float*>(result->outputs[0].data());
      float worst = 0;
      for (int64_t i = 0; i < elements; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, 2e-6f);
    }
  }
}

// The fused QKV layout end to end, with and without the head merge: heads
// read in place and rows written in place give what the copies gave.
TEST(FuseAttentionTest, CompiledFusedQkvMatchesAReference) {
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const int64_t s = 33, b = 2, h = 4, dh = 16, e = h * dh;
  const std::vector<float> x = Random(s * b * 3 * e, 4);
  // The heads (b * h, s, dh) of each third, as the graph's reshapes make them.
  std::vector<float> heads[3];
  for (int part = 0; part < 3; ++part) {
    heads[part].resize(b * h * s * dh);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t hi = 0; hi < h; ++hi) {
        for (int64_t si = 0; si < s; ++si) {
          for (int64_t j = 0; j < dh; ++j) {
            heads[part][((bi * h + hi) * s + si) * dh + j] =
                x[(si * b + bi) * 3 * e + part * e + hi * dh + j];
          }
        }
      }
    }
  }
  const std::vector<float> want =
      Reference(heads[0], heads[1], heads[2], b * h, s, dh, 1 / std::sqrt(static_cast<double>(dh)),
                [](int64_t, int64_t, int64_t) { return 0.0; });
  for (bool merge : {false, true}) {
    SCOPED_TRACE(merge ? "merged" : "heads");
    const std::string name = merge ? "merged" : "heads";
    auto compiled = (*manager)->Compile(name, FusedQkvGraph(s, b, h, dh, merge), CompileOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    Tensor in = Make({DType::kFloat32, {s, b, 3 * e}}, x);
    auto result = (*manager)->Find(name)->Run({&in});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->outputs[0].type().NumElements(), static_cast<int64_t>(want.size()));
    const float* got = static_cast<const float*>(result->outputs[0].data());
    float worst = 0;
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t hi = 0; hi < h; ++hi) {
        for (int64_t si = 0; si < s; ++si) {
          for (int64_t j = 0; j < dh; ++j) {
            const float w = want[((bi * h + hi) * s + si) * dh + j];
            const int64_t at =
                merge ? (si * b + bi) * e + hi * dh + j : ((bi * h + hi) * s + si) * dh + j;
            worst = std::max(worst, std::fabs(got[at] - w));
          }
        }
      }
    }
    EXPECT_LE(worst, 2e-6f);
  }
}

// A full-shaped float mask as the add's first operand, then a scale after
// the add: softmax((mask + q k^T) * 0.5) v, so the mask joins at 0.5 too.
TEST(FuseAttentionTest, AMaskBeforeTheScoresAndAScaleAfterIt) {
  const int64_t n = 3, s = 21, d = 32;
  Graph g;
  const TensorType heads{DType::kFloat32, {n, s, d}};
  Node* q = g.AddInput("q", heads);
  Node* k = g.AddInput("k", heads);
  Node* v = g.AddInput("v", heads);
  Node* mask = g.AddInput("mask", {DType::kFloat32, {n, s, s}});
  Node* scores = Op(g, "matmul", {q, Op(g, "transpose", {k}, TransposeAttrs{{0, 2, 1}})});
  scores = Op(g, "mul", {Op(g, "add", {mask, scores}), Scalar(g, 0.5f)});
  g.AddOutput(Op(g, "matmul", {Op(g, "softmax", {scores}, AxisAttrs{-1}), v}));
  ASSERT_TRUE(InferTypes(g).ok());
  Graph copy = g.Clone();
  absl::StatusOr<bool> changed = RunPass(copy);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed);
  ASSERT_EQ(copy.outputs()[0]->op_name(), "attention") << PrintGraph(copy);

  const std::vector<float> qv = Random(n * s * d, 5), kv = Random(n * s * d, 6),
                           vv = Random(n * s * d, 7), mv = Random(n * s * s, 8);
  const std::vector<float> want =
      Reference(qv, kv, vv, n, s, d, 0.5,
                [&](int64_t e, int64_t i, int64_t t) { return 0.5 * mv[(e * s + i) * s + t]; });
  auto manager = engine::ModelManager::Create({});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto compiled = (*manager)->Compile("m", std::move(g), CompileOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  Tensor tq = Make(heads, qv), tk = Make(heads, kv), tv = Make(heads, vv),
         tm = Make({DType::kFloat32, {n, s, s}}, mv);
  auto result = (*manager)->Find("m")->Run({&tq, &tk, &tv, &tm});
  ASSERT_TRUE(result.ok()) << result.status();
  const float* got = static_cast<const float*>(result->outputs[0].data());
  float worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 2e-6f);
}

}  // namespace
}  // namespace kiln
