// IntegerQdqMatMul, for each matmul or dense whose weight is a 2-D constant:
//   1. The activation x (..., K): uint8 or int8 integers minus a zero point
//      za (MatchQuantizedActivation, qdq_operands.h), read as cast<u8>(c) of
//      SimplifyFakeQuant's clip or as the uint8 tensor itself; int8 values
//      (ONNX Runtime's default QDQ activations) are read with 128 added, and
//      za with them, which leaves every difference x - za as it was. Any
//      batch dims of x are rows of one (M, K) product: the weight is shared.
//   2. The weight: a float32 or int32 constant of integers in [-128, 127]
//      (the centered weight QDQ, MatMulInteger and QLinearMatMul fold to),
//      packed at compile time as kiln_qmatmul_u8s8 reads it (common/
//      kernel_abi.h): [n / 16][k / 4][n % 16][k % 4] int8, zero past K and N.
//   3. The zero point: sum (x - za) * w = sum x * w - za * sum w, so the
//      correction -za * colsum(w) per output column is a constant; a bias
//      operand of integers adds to it, still in int32. A computed za
//      (DynamicQuantizeLinear's, before MatMulInteger) makes it a small
//      int32 op on that constant and colsum(w), run per inference.
//   4. The product's type: a float32 product (QDQ MatMul and Gemm) is
//      replaced itself; an int32 one (MatMulInteger, QLinearMatMul) whose one
//      reader converts it to float32 has that conversion replaced (the
//      kernel rounds the exact int32 sum to float32 the same way); any other
//      int32 product becomes the op's int32 form (no scale and bias operands,
//      kiln_qmatmul_u8s8_i32).
//   5. The epilogue (float32 form): the replaced node's only reader, a
//      multiply by a constant with one value or one per column (x_scale *
//      w_scale), and that one's only reader, an add of such a constant (the
//      bias), become the kernel's scale and bias (1 and 0 otherwise),
//      applied in one FMA as the float product's fused epilogue did.
//   6. Other readers of an activation made uint8 read it widened
//      (Uint8Activations::RewireSelects), as in IntegerQdqConv.
// Every int32 sum is exact (K < 2^31 / (255 * 128) is checked); the float
// path before summed the same integers in float32, exact below 2^24.
// Why a pass of its own rather than a branch of IntegerQdqConv: the two
// share only what qdq_operands.h holds; the weight's packing, the matched
// product forms (int32 products, dense's transposed weight) and the
// epilogue's broadcast shapes all differ, and each reads alone.
#include "compiler/passes/integer_qdq_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/kernel_abi.h"
#include "common/status_macros.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/qdq_operands.h"

namespace kiln {
namespace {

constexpr int64_t kGroup = abi::kQMatMulKGroup;
constexpr int64_t kBlock = abi::kQMatMulColumnBlock;

struct PackedWeight {
  std::shared_ptr<ConstantData> packed;      // int8 (NB, KP * 16)
  std::shared_ptr<ConstantData> correction;  // int32 (N)
  std::vector<double> sums;                  // each column's
};

bool IsInt8(float v) {
  return v >= -128 && v <= 127 && v == static_cast<float>(static_cast<int>(v));
}
bool IsInt8(int32_t v) { return v >= -128 && v <= 127; }

// w's values in (k, n) order as int8, or nothing when one is not an integer
// in int8's range. Typed reads: a BERT-base layer's weights are 2.4M values.
template <typename T>
std::optional<std::vector<int8_t>> Int8Values(const T* v, int64_t k, int64_t n, bool transposed) {
  std::vector<int8_t> out(k * n);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; ++j) {
      const T x = transposed ? v[j * k + kk] : v[kk * n + j];
      if (!IsInt8(x)) return std::nullopt;
      out[kk * n + j] = static_cast<int8_t>(x);
    }
  }
  return out;
}

// Steps 2 and 3 (`bias` may be null). `transposed`: w is (N, K). With a
// computed zero point (`zero` 0 here) the correction must hold any of them.
std::optional<PackedWeight> PackWeight(const Node* w, bool transposed, int64_t zero,
                                       bool computed_zero, const Node* bias) {
  if (!w->is_constant() || w->type.rank() != 2 ||
      (w->type.dtype != DType::kFloat32 && w->type.dtype != DType::kInt32)) {
    return std::nullopt;
  }
  const int64_t k = w->type.shape[transposed ? 1 : 0], n = w->type.shape[transposed ? 0 : 1];
  if (k == 0 || n == 0 || k * 255 * 128 >= (int64_t{1} << 31)) return std::nullopt;
  if (bias != nullptr && (!bias->is_constant() || bias->type.NumElements() != n)) {
    return std::nullopt;
  }
  const std::optional<std::vector<int8_t>> values =
      w->type.dtype == DType::kFloat32 ? Int8Values(w->value->data<float>(), k, n, transposed)
                                       : Int8Values(w->value->data<int32_t>(), k, n, transposed);
  if (!values) return std::nullopt;
  const int64_t kq = (k + kGroup - 1) / kGroup, blocks = (n + kBlock - 1) / kBlock;
  std::string packed(blocks * kq * kGroup * kBlock, '\0');
  std::vector<int64_t> sums(n, 0);
  // In the packing's order within each K group, so that each 64-byte run of
  // it is written at once (row by row, every write was to another cache line
  // and a BERT-base weight took 20 ms to pack).
  for (int64_t q = 0; q < kq; ++q) {
    for (int64_t j = 0; j < n; ++j) {
      char* group = &packed[((j / kBlock * kq + q) * kBlock + j % kBlock) * kGroup];
      for (int64_t kk = q * kGroup; kk < std::min(k, (q + 1) * kGroup); ++kk) {
        const int8_t v = (*values)[kk * n + j];
        group[kk % kGroup] = static_cast<char>(v);
        sums[j] += v;
      }
    }
  }
  std::vector<int32_t> correction(n);
  for (int64_t j = 0; j < n; ++j) {
    int64_t c = -zero * sums[j];
    if (bias != nullptr) {
      const double b = ReadElementAsDouble(bias->type.dtype, bias->value->bytes.data(), j);
      if (!(std::fabs(b) < 2147483648.0) || b != std::nearbyint(b)) return std::nullopt;
      c += static_cast<int64_t>(b);
    }
    const int64_t reach = computed_zero ? 255 * std::abs(sums[j]) : 0;
    if (c - reach < INT32_MIN || c + reach > INT32_MAX) return std::nullopt;
    correction[j] = static_cast<int32_t>(c);
  }
  PackedWeight out;
  out.packed = std::make_shared<ConstantData>();
  out.packed->type = TensorType{DType::kInt8, {blocks, kq * kGroup * kBlock}};
  out.packed->bytes = ConstantBytes(std::move(packed));
  out.correction = std::make_shared<ConstantData>();
  out.correction->type = TensorType{DType::kInt32, {n}};
  std::string corr(n * sizeof(int32_t), '\0');
  std::memcpy(corr.data(), correction.data(), corr.size());
  out.correction->bytes = ConstantBytes(std::move(corr));
  out.sums.assign(sums.begin(), sums.end());
  return out;
}

// Step 5: the per-column values of `s` (one value, or one per column of a
// shape (1, ..., 1, N)), or nothing.
std::optional<std::vector<double>> ColumnValues(const Node* s, int64_t columns) {
  if (!s->is_constant() || s->type.dtype != DType::kFloat32) return std::nullopt;
  const std::vector<double> v = ExactValues(s);  // float64 where the frontend kept it
  if (s->type.NumElements() == 1) return std::vector<double>(columns, v[0]);
  if (s->type.rank() < 1 || s->type.shape.back() != columns || s->type.NumElements() != columns) {
    return std::nullopt;
  }
  return v;
}

absl::StatusOr<bool> IntegerQdqMatMul(Graph& graph, bool host_has_vnni) {
  if (!host_has_vnni) return false;
  const OpRegistry& ops = OpRegistry::Default();
  const Readers readers(graph);
  bool changed = false;
  Uint8Activations uint8;
  for (Node* product : graph.TopologicalOrder()) {
    const bool transposed = IsOp(product, "dense");
    if (!transposed && !IsOp(product, "matmul")) continue;
    const DType dtype = product->type.dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kInt32) continue;
    const std::optional<QuantizedActivation> x = MatchQuantizedActivation(product->inputs[0]);
    if (!x || (x->clip != nullptr && dtype != DType::kFloat32)) continue;
    const Node* product_bias = product->inputs.size() == 3 ? product->inputs[2] : nullptr;
    const std::optional<PackedWeight> w = PackWeight(product->inputs[1], transposed, x->zero,
                                                     x->zero_tensor != nullptr, product_bias);
    if (!w) continue;
    // Step 4.
    Node* replaced = product;
    bool scaled = true;
    if (dtype == DType::kInt32) {
      Node* reader = readers.OnlyReader(product);
      if (reader != nullptr && IsOp(reader, "cast") && reader->type.dtype == DType::kFloat32) {
        replaced = reader;
      } else {
        scaled = false;
      }
    }
    const int64_t columns = product->type.shape.back();
    std::vector<double> scale(columns, 1.0), bias(columns, 0.0);
    if (Node* mul = scaled ? readers.OnlyBinaryReader(replaced, "mul") : nullptr) {
      if (std::optional<std::vector<double>> s = ColumnValues(mul->inputs[1], columns)) {
        scale = *std::move(s);
        replaced = mul;
        if (Node* add = readers.OnlyBinaryReader(mul, "add")) {
          if (std::optional<std::vector<double>> b = ColumnValues(add->inputs[1], columns)) {
            bias = *std::move(b);
            replaced = add;
          }
        }
      }
    }
    const std::string& name = product->name;
    Node* u8 = uint8.Get(graph, *x);
    Node* packed = graph.AddConstant(name + "/w_s8", w->packed);
    Node* correction = graph.AddConstant(name + "/zero_point_correction", w->correction);
    if (Node* z = x->zero_tensor) {  // step 3 at run time: - z * colsum(w)
      if (z->type.rank() != 0) {
        z = graph.AddOp(name + "/x_zero", ops.Find("reshape"), {z}, ReshapeAttrs{{}});
      }
      z = graph.AddOp(name + "/x_zero_i32", ops.Find("cast"), {z}, CastAttrs{DType::kInt32});
      Node* sums =
          graph.AddConstant(name + "/column_sums", MakeConstant(DType::kInt32, {columns}, w->sums));
      Node* term = graph.AddOp(name + "/zero_term", ops.Find("mul"), {z, sums}, NoAttrs{});
      correction = graph.AddOp(name + "/zero_point_correction_computed", ops.Find("sub"),
                               {correction, term}, NoAttrs{});
    }
    std::vector<Node*> operands{u8, packed, correction};
    if (scaled) {
      operands.push_back(graph.AddConstant(name + "/scale", MakeExactConstant({columns}, scale)));
      operands.push_back(graph.AddConstant(name + "/bias", MakeExactConstant({columns}, bias)));
    }
    Node* q = graph.AddOp(name + "/u8s8", ops.Find("qmatmul_u8s8"), operands, NoAttrs{});
    graph.ReplaceAllUses(replaced, q);
    changed = true;
  }
  if (!changed) return false;
  uint8.RewireSelects(graph, readers);  // step 6
  graph.RemoveDeadNodes();
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

class IntegerQdqMatMulPass final : public Pass {
 public:
  explicit IntegerQdqMatMulPass(bool host_has_vnni) : host_has_vnni_(host_has_vnni) {}
  const PassInfo& info() const override { return info_; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext&) override {
    return IntegerQdqMatMul(graph, host_has_vnni_);
  }

 private:
  PassInfo info_{"IntegerQdqMatMul", 2, {"InferType", "SimplifyFakeQuant"}};
  bool host_has_vnni_;
};

}  // namespace

std::unique_ptr<Pass> CreateIntegerQdqMatMulPass() {
  return std::make_unique<IntegerQdqMatMulPass>(HostHasVnni());
}

std::unique_ptr<Pass> CreateIntegerQdqMatMulPassForTest(bool host_has_vnni) {
  return std::make_unique<IntegerQdqMatMulPass>(host_has_vnni);
}

}  // namespace kiln
