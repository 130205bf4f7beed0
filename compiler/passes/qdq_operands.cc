#include "compiler/passes/qdq_operands.h"

#include <string>

#include "compiler/ir/element_access.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/integral_values.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 8;

// c when `n` is where(c == c, c, 0) of a float32 clip c to bounds inside
// [0, 255], or inside [-128, 127] (`offset` 128 then, else 0), of an
// integral value: what SimplifyFakeQuant makes of a cast<f32>(cast<u8>(c))
// or cast<f32>(cast<i8>(c)), and equal to it.
Node* SelectedClip(Node* n, int64_t* offset) {
  if (!IsOp(n, "where")) return nullptr;
  Node* is_number = n->inputs[0];
  Node* c = n->inputs[1];
  const std::optional<double> nan_as = ScalarConstant(n->inputs[2]);
  if (!IsOp(is_number, "equal") || is_number->inputs[0] != c || is_number->inputs[1] != c ||
      !nan_as || *nan_as != 0 || !IsOp(c, "clip") || c->type.dtype != DType::kFloat32 ||
      n->type != c->type) {
    return nullptr;
  }
  const ActivationAttrs& bounds = std::get<ActivationAttrs>(c->attrs);
  if (bounds.alpha >= 0 && bounds.beta <= 255) {
    *offset = 0;
  } else if (bounds.alpha >= -128 && bounds.beta <= 127) {
    *offset = 128;
  } else {
    return nullptr;
  }
  return IsIntegral(c, kMaxDepth) ? c : nullptr;
}

// Whether `n` is cast<f32>(u) or cast<i32>(u) of a tensor u of `dtype`.
bool Widened(const Node* n, DType dtype) {
  return IsOp(n, "cast") && (n->type.dtype == DType::kFloat32 || n->type.dtype == DType::kInt32) &&
         n->inputs[0]->type.dtype == dtype;
}

}  // namespace

bool IsOp(const Node* n, const char* name) { return n->is_op() && n->op->name == name; }

std::optional<double> ScalarConstant(const Node* n) {
  if (!n->is_constant() || n->type.NumElements() != 1) return std::nullopt;
  return ReadElementAsDouble(n->type.dtype, n->value->bytes.data(), 0);
}

std::optional<QuantizedActivation> MatchQuantizedActivation(Node* a) {
  QuantizedActivation out;
  Node* zero = nullptr;
  if (IsOp(a, "sub")) {
    zero = a->inputs[1];
    a = a->inputs[0];
  }
  if (Widened(a, DType::kUInt8)) {
    out.uint8 = a->inputs[0];
  } else if (Widened(a, DType::kInt8)) {
    out.int8 = a->inputs[0];
    out.offset = 128;
  } else if (Node* c = SelectedClip(a, &out.offset)) {
    out.clip = c;
  } else {
    return std::nullopt;
  }
  if (zero == nullptr) {
    out.zero = out.offset;
  } else if (out.offset == 0 && Widened(zero, DType::kUInt8) && zero->type.NumElements() == 1 &&
             !zero->inputs[0]->is_constant()) {
    out.zero_tensor = zero->inputs[0];
  } else {
    const std::optional<double> zp = ScalarConstant(zero);
    if (!zp || !IsIntegerValue(*zp)) return std::nullopt;
    out.zero = static_cast<int64_t>(*zp) + out.offset;
    if (!(*zp + out.offset >= 0 && *zp + out.offset <= 255)) return std::nullopt;
  }
  return out;
}

Readers::Readers(const Graph& graph) {
  for (Node* n : graph.AllNodes()) {
    for (Node* in : n->inputs) of[in].push_back(n);
  }
  for (const Node* n : graph.outputs()) is_output[n] = true;
}

Node* Readers::OnlyReader(const Node* n) const {
  auto it = of.find(n);
  if (it == of.end() || it->second.size() != 1 || is_output.count(n)) return nullptr;
  return it->second[0];
}

Node* Readers::OnlyBinaryReader(const Node* n, const char* op) const {
  Node* r = OnlyReader(n);
  if (r == nullptr || !IsOp(r, op) || r->inputs.size() != 2 || r->inputs[0] != n ||
      r->type != n->type) {
    return nullptr;
  }
  return r;
}

std::shared_ptr<ConstantData> MakeConstant(DType dtype, std::vector<int64_t> shape,
                                           const std::vector<double>& values) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{dtype, std::move(shape)};
  std::string bytes(data->type.ByteSize(), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    WriteElementFromDouble(dtype, bytes.data(), static_cast<int64_t>(i), values[i]);
  }
  data->bytes = ConstantBytes(std::move(bytes));
  return data;
}

std::shared_ptr<ConstantData> MakeExactConstant(std::vector<int64_t> shape,
                                                const std::vector<double>& exact) {
  std::shared_ptr<ConstantData> data = MakeConstant(DType::kFloat32, std::move(shape), exact);
  data->exact = std::make_shared<const std::vector<double>>(exact);
  return data;
}

std::vector<double> ExactValues(const Node* constant) {
  const ConstantData& data = *constant->value;
  if (data.exact != nullptr) return *data.exact;
  std::vector<double> out(data.type.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = ReadElementAsDouble(data.type.dtype, data.bytes.data(), static_cast<int64_t>(i));
  }
  return out;
}

Node* Uint8Activations::Get(Graph& graph, const QuantizedActivation& x) {
  if (x.uint8 != nullptr) return x.uint8;
  Node* from = x.clip != nullptr ? x.clip : x.int8;
  Node*& cast = uint8_of_[from];
  if (cast != nullptr) return cast;
  const OpRegistry& ops = OpRegistry::Default();
  Node* v = from;  // the value to add the offset to, in int32 or a clip's float32
  DType type = DType::kFloat32;
  if (x.int8 != nullptr) {
    v = graph.AddOp(from->name + "/i32", ops.Find("cast"), {v}, CastAttrs{DType::kInt32});
    type = DType::kInt32;
  }
  if (x.offset != 0) {
    Node* offset = graph.AddConstant(from->name + "/offset",
                                     MakeConstant(type, {}, {static_cast<double>(x.offset)}));
    v = graph.AddOp(from->name + "/offset_by", ops.Find("add"), {v, offset}, NoAttrs{});
  }
  cast = graph.AddOp(from->name + "/u8", ops.Find("cast"), {v}, CastAttrs{DType::kUInt8});
  if (x.clip != nullptr && x.offset == 0) selects_of_.push_back({x.clip, cast});
  return cast;
}

void Uint8Activations::RewireSelects(Graph& graph, const Readers& readers) const {
  for (const auto& [clip, u8] : selects_of_) {
    auto it = readers.of.find(clip);
    if (it == readers.of.end()) continue;
    Node* wide = nullptr;
    for (Node* r : it->second) {
      int64_t offset = 0;
      if (SelectedClip(r, &offset) != clip) continue;
      if (wide == nullptr) {
        wide = graph.AddOp(u8->name + "/f32", OpRegistry::Default().Find("cast"), {u8},
                           CastAttrs{DType::kFloat32});
      }
      graph.ReplaceAllUses(r, wide);
    }
  }
}

bool HostHasVnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

}  // namespace kiln
