// IntegerQdqConv, for each conv2d of groups 1:
//   1. The activation: the conv's input is uint8 or int8 integers minus a
//      constant zero point za (MatchQuantizedActivation, qdq_operands.h; a
//      computed one is left: the padding holds its value): a select of
//      SimplifyFakeQuant's float clip, read as cast<u8>(c), or cast<f32>(u)
//      of a uint8 tensor u (QLinearConv, ConvInteger), read as u; int8
//      values are read with 128 added, and za with them.
//   2. The weight: a float constant (O, C, KH, KW) of integers in
//      [-128, 127], packed at compile time as int8 rows of C * KH * KW
//      values zero-padded to a multiple of 4 (kiln_qconv_u8s8's K groups).
//   3. The zero point: sum (x - za) * w = sum x * w - za * sum w, so the
//      correction -za * rowsum(w) per output channel is a constant; w's own
//      zero point is already folded into its centered integers (a weight
//      whose centered values leave int8 is not matched).
//   4. A bias operand of integers (QLinearConv's int32 bias, in accumulator
//      units) adds to the correction, still in int32.
//   5. The epilogue: the conv's only reader, a multiply by a constant with
//      one value or one per channel (the QDQ conv's x_scale * w_scale), and
//      that one's only reader, an add of such a constant (the bias), become
//      the kernel's scale and bias (1 and 0 otherwise). The kernel applies
//      them in one FMA, as the float conv's fused epilogue did, so the
//      rounding before requantisation is the same.
//   6. Every other reader of an activation made uint8 here, a select of
//      SimplifyFakeQuant (a residual branch's DequantizeLinear), reads
//      cast<f32>(cast<u8>(c)) instead (Uint8Activations::RewireSelects), so
//      the activation is stored once, as uint8.
// Every int32 sum is exact (C * KH * KW < 2^31 / (255 * 128) is checked);
// the float path before summed the same integers in float32, exact below
// 2^24, so results agree wherever that one was exact.
#include "compiler/passes/integer_qdq_conv.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/integral_values.h"
#include "compiler/passes/qdq_operands.h"

namespace kiln {
namespace {

constexpr int64_t kGroup = 4;  // abi::kQConvKGroup

struct PackedWeight {
  std::shared_ptr<ConstantData> rows;        // int8 (O, KP)
  std::shared_ptr<ConstantData> correction;  // int32 (O)
};

// Steps 2, 3 and 4 (`bias` may be null).
std::optional<PackedWeight> PackWeight(const Node* w, int64_t zero, const Node* bias) {
  if (!w->is_constant() || w->type.dtype != DType::kFloat32 || w->type.rank() != 4) {
    return std::nullopt;
  }
  const int64_t o = w->type.shape[0];
  const int64_t k = w->type.NumElements() / o;
  if (k * 255 * 128 >= (int64_t{1} << 31)) return std::nullopt;
  const int64_t kp = (k + kGroup - 1) / kGroup * kGroup;
  if (bias != nullptr && (!bias->is_constant() || bias->type.dtype != DType::kFloat32 ||
                          bias->type.NumElements() != o)) {
    return std::nullopt;
  }
  const float* v = w->value->data<float>();
  std::string rows(o * kp, '\0');
  std::vector<int32_t> correction(o);
  for (int64_t n = 0; n < o; ++n) {
    int64_t sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      const float x = v[n * k + i];
      if (!(x >= -128 && x <= 127) || x != static_cast<float>(static_cast<int>(x))) {
        return std::nullopt;
      }
      rows[n * kp + i] = static_cast<char>(static_cast<int8_t>(x));
      sum += static_cast<int64_t>(x);
    }
    int64_t c = -zero * sum;
    if (bias != nullptr) {
      const float b = bias->value->data<float>()[n];
      if (!(std::fabs(b) < 2147483648.0f) || b != std::nearbyint(b)) return std::nullopt;
      c += static_cast<int64_t>(b);
    }
    if (c < INT32_MIN || c > INT32_MAX) return std::nullopt;
    correction[n] = static_cast<int32_t>(c);
  }
  PackedWeight out;
  out.rows = std::make_shared<ConstantData>();
  out.rows->type = TensorType{DType::kInt8, {o, kp}};
  out.rows->bytes = ConstantBytes(std::move(rows));
  out.correction = std::make_shared<ConstantData>();
  out.correction->type = TensorType{DType::kInt32, {o}};
  std::string bytes(o * sizeof(int32_t), '\0');
  std::memcpy(bytes.data(), correction.data(), bytes.size());
  out.correction->bytes = ConstantBytes(std::move(bytes));
  return out;
}

// Step 4: the per-channel values of `s` (one value, or one per channel of a
// (N, O, H, W) tensor), or nothing.
std::optional<std::vector<double>> ChannelValues(const Node* s, int64_t channels) {
  if (!s->is_constant() || s->type.dtype != DType::kFloat32) return std::nullopt;
  const std::vector<double> v = ExactValues(s);  // float64 where the frontend kept it
  if (s->type.NumElements() == 1) return std::vector<double>(channels, v[0]);
  const std::vector<int64_t>& shape = s->type.shape;
  if (shape.size() < 3 || shape.size() > 4 || shape[shape.size() - 3] != channels ||
      shape[shape.size() - 2] != 1 || shape.back() != 1 || (shape.size() == 4 && shape[0] != 1)) {
    return std::nullopt;
  }
  return v;
}

absl::StatusOr<bool> IntegerQdqConv(Graph& graph, bool host_has_vnni) {
  if (!host_has_vnni) return false;
  const OpRegistry& ops = OpRegistry::Default();
  const Readers readers(graph);
  bool changed = false;
  Uint8Activations uint8;
  for (Node* conv : graph.TopologicalOrder()) {
    if (!IsOp(conv, "conv2d")) continue;
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    if (a.groups != 1) continue;
    const std::optional<QuantizedActivation> x = MatchQuantizedActivation(conv->inputs[0]);
    if (!x || x->zero_tensor != nullptr) continue;  // the padding needs the zero point's value
    const Node* conv_bias = conv->inputs.size() == 3 ? conv->inputs[2] : nullptr;
    const std::optional<PackedWeight> w = PackWeight(conv->inputs[1], x->zero, conv_bias);
    if (!w) continue;
    const int64_t channels = conv->type.shape[1];
    Node* replaced = conv;
    std::vector<double> scale(channels, 1.0), bias(channels, 0.0);
    if (Node* mul = readers.OnlyBinaryReader(conv, "mul")) {
      if (std::optional<std::vector<double>> s = ChannelValues(mul->inputs[1], channels)) {
        scale = *std::move(s);
        replaced = mul;
        if (Node* add = readers.OnlyBinaryReader(mul, "add")) {
          if (std::optional<std::vector<double>> b = ChannelValues(add->inputs[1], channels)) {
            bias = *std::move(b);
            replaced = add;
          }
        }
      }
    }
    const std::string& name = conv->name;
    Node* u8 = uint8.Get(graph, *x);
    Node* rows = graph.AddConstant(name + "/w_s8", w->rows);
    Node* correction = graph.AddConstant(name + "/zero_point_correction", w->correction);
    Node* scales = graph.AddConstant(name + "/scale", MakeExactConstant({channels}, scale));
    Node* biases = graph.AddConstant(name + "/bias", MakeExactConstant({channels}, bias));
    Node* zero = graph.AddConstant(
        name + "/x_zero", MakeConstant(DType::kUInt8, {}, {static_cast<double>(x->zero)}));
    Pool2DAttrs window;
    window.kernel = {conv->inputs[1]->type.shape[2], conv->inputs[1]->type.shape[3]};
    window.strides = a.strides;
    window.padding = a.padding;
    window.dilation = a.dilation;
    Node* q = graph.AddOp(name + "/u8s8", ops.Find("qconv2d_u8s8"),
                          {u8, rows, correction, scales, biases, zero}, window);
    graph.ReplaceAllUses(replaced, q);
    changed = true;
  }
  if (!changed) return false;
  uint8.RewireSelects(graph, readers);  // step 6
  graph.RemoveDeadNodes();
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

class IntegerQdqConvPass final : public Pass {
 public:
  explicit IntegerQdqConvPass(bool host_has_vnni) : host_has_vnni_(host_has_vnni) {}
  const PassInfo& info() const override { return info_; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext&) override {
    return IntegerQdqConv(graph, host_has_vnni_);
  }

 private:
  PassInfo info_{"IntegerQdqConv", 2, {"InferType", "SimplifyFakeQuant"}};
  bool host_has_vnni_;
};

}  // namespace

std::unique_ptr<Pass> CreateIntegerQdqConvPass() {
  return std::make_unique<IntegerQdqConvPass>(HostHasVnni());
}

std::unique_ptr<Pass> CreateIntegerQdqConvPassForTest(bool host_has_vnni) {
  return std::make_unique<IntegerQdqConvPass>(host_has_vnni);
}

}  // namespace kiln
