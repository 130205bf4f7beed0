// The machinery every ONNX op converter shares: the Converter that turns
// ONNX nodes into typed Kiln op nodes (values by name, constants, shape
// operands folded or waited for), attribute readers, and element types and
// tensors read from ONNX protos. Converters for families of ops live in
// files of their own (onnx_*_converters.cc) and register into one table.
// Internal to compiler/frontend: onnx_importer.h is the public interface.
#ifndef KILN_COMPILER_FRONTEND_ONNX_CONVERTER_H_
#define KILN_COMPILER_FRONTEND_ONNX_CONVERTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/element_access.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/fold_constant.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {

// An ONNX element type as a DType; strings and complex numbers are
// Unimplemented naming `what`.
absl::StatusOr<DType> ConvertElemType(int32_t elem, const std::string& what);

// `t`'s data as a constant; with `take`, raw data moves out of `*take` (the
// same tensor, owned by the caller) instead of being copied.
absl::StatusOr<std::shared_ptr<ConstantData>> ConvertTensor(const onnx::TensorProto& t,
                                                            onnx::TensorProto* take = nullptr);

// Whether `t` keeps its data in an external file (refused everywhere).
bool KeepsDataOutside(const onnx::TensorProto& t);

class Converter;
using ConvertFn = std::function<absl::Status(Converter&, const onnx::NodeProto&)>;
using ConverterMap = std::map<std::string, ConvertFn>;

// Every op type Kiln converts (onnx_importer.cc assembles it from the families).
const ConverterMap& ConverterTable();

// Unimplemented, naming op, node and opset, for a node Kiln has no
// converter for (any domain but ONNX's default is unsupported).
absl::Status CheckOperatorSupported(const onnx::NodeProto& n, int64_t opset);

inline constexpr char kWaitingPayload[] = "kiln.dev/onnx-waits-for-values";
inline constexpr char kNeedsValuesPayload[] = "kiln.dev/onnx-needs-input-values";

class Converter {
 public:
  Converter(const OpRegistry& ops, int64_t opset) : ops_(ops), opset_(opset) {}

  Graph& graph() { return graph_; }
  int64_t opset() const { return opset_; }

  absl::Status Define(const std::string& name, Node* node) {
    if (name.empty()) return absl::OkStatus();
    values_[name] = node;
    return absl::OkStatus();
  }

  absl::StatusOr<Node*> Value(const onnx::NodeProto& n, int i) {
    if (i >= n.input_size() || n.input(i).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n.name(), "' (", n.op_type(), ") lacks input ", i));
    }
    if (waiting_.count(n.input(i))) return WaitingForValues();
    auto it = values_.find(n.input(i));
    if (it == values_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' reads '", n.input(i),
                                                     "', which nothing defines"));
    }
    return it->second;
  }

  // Graph inputs a node needs the values of (Reshape's shape fed by the
  // model's input): found, the node and everything after it wait, and the
  // import ends with them all named (NeedsInputValues) instead of at the
  // first.
  static absl::Status WaitingForValues() {
    absl::Status s = absl::UnimplementedError("waits for an input's value");
    s.SetPayload(kWaitingPayload, absl::Cord("1"));
    return s;
  }
  static bool IsWaiting(const absl::Status& s) {
    return s.GetPayload(kWaitingPayload).has_value();
  }
  void MarkWaiting(const onnx::NodeProto& n) {
    for (const std::string& out : n.output()) waiting_.insert(out);
  }
  const std::set<std::string>& needed_values() const { return needed_values_; }
  bool HasInput(const onnx::NodeProto& n, int i) const {
    return i < n.input_size() && !n.input(i).empty();
  }

  // `v` as a constant: itself, or — for a shape subgraph as PyTorch exports
  // them (Shape -> Gather -> Unsqueeze -> Concat) — evaluated here.
  // Results are memoised: without that, every Gather or Slice would walk the
  // whole graph above it again (seconds on a 4-layer transformer).
  absl::StatusOr<Node*> Folded(Node* v) {
    // Post-order with an explicit stack: a chain of thousands of shape ops
    // must not overflow the thread's stack (issue 20's class of crash).
    auto settled = [this](Node* n) {
      return n->is_constant() || n->is_input() || folded_.count(n) > 0;
    };
    std::vector<Node*> stack = {v};
    while (!stack.empty()) {
      Node* n = stack.back();
      if (settled(n)) {
        stack.pop_back();
        continue;
      }
      bool inputs_settled = true;
      for (Node* in : n->inputs) {
        if (!settled(in)) {
          stack.push_back(in);
          inputs_settled = false;
        }
      }
      if (!inputs_settled) continue;
      stack.pop_back();
      bool all_constant = true;
      for (Node*& in : n->inputs) {
        if (auto f = folded_.find(in); f != folded_.end()) in = f->second;
        all_constant &= in->is_constant();
      }
      Node* result = n;
      if (all_constant) {
        absl::StatusOr<std::shared_ptr<const ConstantData>> value = EvaluateConstantNode(*n);
        if (value.ok()) result = graph_.AddConstant(n->name, *std::move(value));
      }
      folded_[n] = result;
    }
    auto f = folded_.find(v);
    return f == folded_.end() ? v : f->second;
  }

  // Operand i as a constant: itself, folded, or (when the model's inputs
  // alone decide it) WaitingForValues, naming them. `what` says what the
  // operand must be, for the Unimplemented otherwise.
  absl::StatusOr<Node*> ConstantOperand(const onnx::NodeProto& n, int i) {
    KILN_ASSIGN_OR_RETURN(Node* v, Value(n, i));
    KILN_ASSIGN_OR_RETURN(v, Folded(v));
    if (!v->is_constant()) {
      // Computed from the model's inputs alone: their values decide it.
      std::set<std::string> leaves;
      if (InputLeaves(v, &leaves) && !leaves.empty()) {
        // The node's other operands past its data may need values too
        // (Slice's ends after its starts): named now, as the node stops here.
        for (int j = 1; j < n.input_size(); ++j) {
          if (j == i || !HasInput(n, j) || waiting_.count(n.input(j))) continue;
          auto other = values_.find(n.input(j));
          if (other == values_.end()) continue;
          absl::StatusOr<Node*> folded = Folded(other->second);
          if (folded.ok() && !(*folded)->is_constant()) InputLeaves(*folded, &leaves);
        }
        needed_values_.insert(leaves.begin(), leaves.end());
        return WaitingForValues();
      }
      return absl::UnimplementedError(absl::StrCat(
          "node '", n.name(), "' (", n.op_type(), "): input ", i,
          " must be a constant or computed from model inputs that are integers or a few "
          "floats or bools (its value decides a shape)"));
    }
    return v;
  }

  // A constant operand's integer values (Reshape's shape, ReduceSum's axes).
  absl::StatusOr<std::vector<int64_t>> ConstantInts(const onnx::NodeProto& n, int i) {
    KILN_ASSIGN_OR_RETURN(Node* v, ConstantOperand(n, i));
    if (!IsIntegerDType(v->type.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): input ", i, " must be integers, got ",
                                                     v->type.ToString()));
    }
    std::vector<int64_t> values(v->type.NumElements());
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = ReadElementAsInt(v->type.dtype, v->value->bytes.data(), k);
    }
    return values;
  }

  // A constant numeric operand's values as doubles (Range's bounds).
  absl::StatusOr<std::vector<double>> ConstantDoubles(const onnx::NodeProto& n, int i) {
    KILN_ASSIGN_OR_RETURN(Node* v, ConstantOperand(n, i));
    std::vector<double> values(v->type.NumElements());
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = ReadElementAsDouble(v->type.dtype, v->value->bytes.data(), k);
    }
    return values;
  }

  // Whether `v` is computed from constants and graph inputs only (collected
  // in `leaves`): then binding those inputs to values folds it. Integer
  // inputs, or float and bool ones of a few values (model_signature.h).
  // Iterative, each node once: a deep or widely shared shape computation
  // must neither overflow the stack nor be walked once per path.
  bool InputLeaves(Node* v, std::set<std::string>* leaves) {
    std::vector<Node*> stack = {v};
    std::set<Node*> seen = {v};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->is_constant()) continue;
      if (n->is_input()) {
        const bool small = (IsFloatDType(n->type.dtype) || n->type.dtype == DType::kBool) &&
                           n->type.NumElements() <= kMaxFloatDecidingValues;
        if (!IsIntegerDType(n->type.dtype) && !small) return false;
        leaves->insert(n->name);
        continue;
      }
      for (Node* in : n->inputs) {
        if (seen.insert(in).second) stack.push_back(in);
      }
    }
    return true;
  }

  Node* Constant(const std::string& name, TensorType type, const void* bytes) {
    auto data = std::make_shared<ConstantData>();
    data->type = std::move(type);
    data->bytes.assign(static_cast<const char*>(bytes), data->type.ByteSize());
    return graph_.AddConstant(name, std::move(data));
  }
  // A scalar constant of `dtype` holding `v` (rounded or converted as a store would).
  Node* ScalarOf(const std::string& name, DType dtype, double v) {
    char bytes[8] = {};
    WriteElementFromDouble(dtype, bytes, 0, v);
    return Constant(name, TensorType{dtype, {}}, bytes);
  }

  // Adds a typed Kiln op node.
  absl::StatusOr<Node*> Add(const onnx::NodeProto& n, const std::string& op,
                            std::vector<Node*> inputs, Attrs attrs = NoAttrs{},
                            const std::string& suffix = "") {
    if (IsFloat32Kernel(op)) {
      return AddInFloat32(n, op, std::move(inputs), std::move(attrs), suffix);
    }
    return AddOp(n, op, std::move(inputs), std::move(attrs), suffix);
  }

  // Convolutions and matrix products have fast kernels for float32 only
  // (packed panels, register tiles). float16 and bfloat16 operands are
  // widened for them and the result rounded back, fused on both sides:
  // computed and accumulated in float32, as ONNX Runtime's CPU provider
  // does. Integer and float64 matrix products take the plain loop nest.
  static bool IsFloat32Kernel(const std::string& op) {
    return op == "conv2d" || op == "conv2d_transpose" || op == "dense" || op == "matmul";
  }

  absl::StatusOr<Node*> AddInFloat32(const onnx::NodeProto& n, const std::string& op,
                                     std::vector<Node*> inputs, Attrs attrs,
                                     const std::string& suffix) {
    const DType dtype = inputs[0]->type.dtype;
    const bool conv = op == "conv2d" || op == "conv2d_transpose";
    if (conv && dtype != DType::kFloat32 && dtype != DType::kFloat16 &&
        dtype != DType::kBFloat16) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", n.name(), "' (", n.op_type(), "): element type ", DTypeName(dtype),
          " is not supported here (float16, bfloat16 and float32 are)"));
    }
    if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
      return AddOp(n, op, std::move(inputs), std::move(attrs), suffix);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i]->type.dtype != dtype) continue;  // the relation reports the mismatch
      KILN_ASSIGN_OR_RETURN(inputs[i], AddOp(n, "cast", {inputs[i]}, CastAttrs{DType::kFloat32},
                                             absl::StrCat(suffix, "/in", i, "_float32")));
    }
    KILN_ASSIGN_OR_RETURN(Node* y, AddOp(n, op, std::move(inputs), std::move(attrs), suffix));
    return AddOp(n, "cast", {y}, CastAttrs{dtype}, absl::StrCat(suffix, "/", DTypeName(dtype)));
  }

  absl::StatusOr<Node*> AddOp(const onnx::NodeProto& n, const std::string& op,
                              std::vector<Node*> inputs, Attrs attrs = NoAttrs{},
                              const std::string& suffix = "") {
    const OpDef* def = ops_.Find(op);
    KILN_CHECK(def != nullptr);
    std::vector<TensorType> types;
    for (const Node* in : inputs) types.push_back(in->type);
    absl::StatusOr<TensorType> type = def->infer_type(types, attrs);
    if (!type.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     "): ", type.status().message()));
    }
    Node* node = graph_.AddOp(n.name() + suffix, def, std::move(inputs), std::move(attrs));
    node->type = *type;
    node->type_known = true;
    return node;
  }

  absl::Status ConvertNode(const onnx::NodeProto& n) {
    KILN_RETURN_IF_ERROR(CheckOperatorSupported(n, opset_));
    KILN_RETURN_IF_ERROR(ConverterTable().at(n.op_type())(*this, n));
    // Secondary outputs (Dropout's mask, training-mode BatchNormalization's
    // statistics) are not produced: refuse a model that names one.
    for (const std::string& out : n.output()) {
      if (!out.empty() && !values_.count(out)) {
        return absl::UnimplementedError(absl::StrCat("node '", n.name(), "' (", n.op_type(),
                                                     ", opset ", opset_, "): output '", out,
                                                     "' is not supported"));
      }
    }
    return absl::OkStatus();
  }

  // What a DequantizeLinear output was made from, so that a Conv, Gemm or
  // MatMul reading it can multiply the integers first and scale after
  // (onnx_quantized_converters.cc).
  struct Dequantized {
    Node* centered = nullptr;  // (x - zero_point) as float32, before the scale
    Node* scale = nullptr;     // as given: a scalar or one per channel of `axis`
    int64_t axis = 1;
  };
  void NoteDequantized(const std::string& name, Dequantized d) { dequantized_[name] = d; }
  const Dequantized* DequantizedFrom(const std::string& name) const {
    auto it = dequantized_.find(name);
    return it == dequantized_.end() ? nullptr : &it->second;
  }

 private:
  const OpRegistry& ops_;
  int64_t opset_;
  Graph graph_;
  std::unordered_map<std::string, Node*> values_;
  // Outputs of nodes waiting for input values, and those inputs.
  std::set<std::string> waiting_;
  std::set<std::string> needed_values_;
  // Folded()'s answers: a node maps to its constant, or to itself when it cannot fold.
  std::unordered_map<Node*, Node*> folded_;
  std::unordered_map<std::string, Dequantized> dequantized_;
};

// Attribute readers: the attribute `name` of `n`, or `fallback` when absent.
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name);
std::string StringAttr(const onnx::NodeProto& n, const std::string& name,
                       const std::string& fallback);
int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback);
float FloatAttr(const onnx::NodeProto& n, const std::string& name, float fallback);
std::vector<int64_t> IntsAttr(const onnx::NodeProto& n, const std::string& name,
                              std::vector<int64_t> fallback);
// An axis attribute of a tensor of rank `rank`, made non-negative: in
// [-rank, rank) (or up to rank itself where one past the last axis is
// meaningful, as Flatten's). Anything else names the node.
absl::StatusOr<int64_t> AxisAttr(const onnx::NodeProto& n, const std::string& name,
                                 int64_t fallback, int64_t rank, bool one_past_last = false);
// auto_pad SAME_UPPER / SAME_LOWER along one dim: {begin, end} padding.
std::pair<int64_t, int64_t> SamePadding(int64_t in, int64_t kernel, int64_t stride,
                                        int64_t dilation, bool upper);
// A 2-D window's strides, dilations and pads: 2, 2 and 4 values, pads >= 0.
absl::Status CheckWindowAttrs(const onnx::NodeProto& n, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dilations,
                              const std::vector<int64_t>& pads);

// Input i of `n` if it is given (ONNX's optional inputs), else null.
absl::StatusOr<Node*> OptionalValue(Converter& c, const onnx::NodeProto& n, int i);

// A 2-D Conv node's convolution of x by w (+ bias), its attributes read from n.
absl::StatusOr<Node*> Conv2D(Converter& c, const onnx::NodeProto& n, Node* x, Node* w,
                             Node* bias);

// 3-D Conv and pooling (NCDHW) for the Conv, MaxPool and AveragePool
// converters: onnx_volume_converters.cc.
absl::Status ConvertVolumeConv(Converter& c, const onnx::NodeProto& n, Node* x, Node* w);
absl::Status ConvertVolumePool(Converter& c, const onnx::NodeProto& n, Node* x, bool average);
// 3-D ConvTranspose with its spatial attributes read (pads: 3 begins, 3 ends).
absl::Status ConvertVolumeConvTranspose(Converter& c, const onnx::NodeProto& n, Node* x, Node* w,
                                        const std::vector<int64_t>& strides,
                                        const std::vector<int64_t>& dilations,
                                        const std::vector<int64_t>& output_padding,
                                        const std::vector<int64_t>& pads);

// conv2d_transpose's attributes for a ConvTranspose node's 2-D window
// (padding: top, left, bottom, right; a negative end pad becomes output
// padding), with the node's group; INVALID_ARGUMENT naming the node.
absl::StatusOr<Attrs> ConvTranspose2DAttrs(const onnx::NodeProto& n,
                                           const std::vector<int64_t>& strides,
                                           const std::vector<int64_t>& dilations,
                                           std::vector<int64_t> output_padding,
                                           std::vector<int64_t> padding);

// A Conv between DequantizeLinear outputs as an integer convolution scaled
// once (onnx_quantized_converters.cc); null when the pattern does not apply.
absl::StatusOr<Node*> QuantizedConv2D(Converter& c, const onnx::NodeProto& n, Node* bias);
// The same for a Gemm (dense with `trans_b`, else matmul; its alpha and beta
// 1, no transA) or a MatMul by a 2-D weight; null when the pattern does not apply.
absl::StatusOr<Node*> QuantizedLinear(Converter& c, const onnx::NodeProto& n, bool trans_b,
                                      Node* bias);

// The families of converters, each adding its op types to `table`.
void AddLossConverters(ConverterMap& table);
void AddQuantizedConverters(ConverterMap& table);
void AddRecurrentConverters(ConverterMap& table);
void AddSignalConverters(ConverterMap& table);
void AddComposedConverters(ConverterMap& table);
void AddValueShapeConverters(ConverterMap& table);

}  // namespace kiln::onnx_import

#endif  // KILN_COMPILER_FRONTEND_ONNX_CONVERTER_H_
