// What the integer QDQ passes (IntegerQdqConv, IntegerQdqMatMul) recognise
// around a product after SimplifyFakeQuant, and the uint8 activations they
// make: the activation operand, the epilogue's readers, the host check.
#ifndef KILN_COMPILER_PASSES_QDQ_OPERANDS_H_
#define KILN_COMPILER_PASSES_QDQ_OPERANDS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"

namespace kiln {

bool IsOp(const Node* n, const char* name);

// The single value of a constant with one element.
std::optional<double> ScalarConstant(const Node* n);

// A product's activation operand: integers minus a zero point, read as
// uint8 (int8 values with 128 added, which the zero point then holds too).
struct QuantizedActivation {
  Node* clip = nullptr;   // a float clip to cast to uint8,
  Node* uint8 = nullptr;  // or a uint8 tensor as it is,
  Node* int8 = nullptr;   // or an int8 tensor
  int64_t offset = 0;     // 128 when the values are int8's
  int64_t zero = 0;       // in [0, 255], the offset included
  // Or the zero point computed, a uint8 tensor of one element
  // (DynamicQuantizeLinear's); `zero` is then 0.
  Node* zero_tensor = nullptr;
};

// `a`, or `a` minus a zero point (a constant, or for uint8 values a
// one-element uint8 tensor widened as `a` is), when `a` is
//   - where(c == c, c, 0), c a float32 clip to bounds inside [0, 255] or
//     [-128, 127] of an integral value (SimplifyFakeQuant's result for QDQ):
//     then cast<u8>(c) (or cast<u8>(c + 128)) holds the same integers, NaN
//     included (the cast makes it 0, as the select did);
//   - cast<f32>(u) or cast<i32>(u) of a uint8 or int8 tensor u (QLinearConv,
//     ConvInteger, MatMulInteger, a DequantizeLinear of a quantised input).
std::optional<QuantizedActivation> MatchQuantizedActivation(Node* a);

// Each node's readers, and whether it is a graph output.
struct Readers {
  explicit Readers(const Graph& graph);
  // The one reader of `n` when it is an `op` of n and a second operand, of
  // n's type, and n is no graph output.
  Node* OnlyBinaryReader(const Node* n, const char* op) const;
  // The one reader of `n` when n is no graph output.
  Node* OnlyReader(const Node* n) const;

  std::unordered_map<const Node*, std::vector<Node*>> of;
  std::unordered_map<const Node*, bool> is_output;
};

// A constant of `dtype` and `shape` holding `values`.
std::shared_ptr<ConstantData> MakeConstant(DType dtype, std::vector<int64_t> shape,
                                           const std::vector<double>& values);

// A float32 constant of `shape` holding `exact` rounded, and `exact` itself
// as its ConstantData::exact (the integer kernels' scales and biases).
std::shared_ptr<ConstantData> MakeExactConstant(std::vector<int64_t> shape,
                                                const std::vector<double>& exact);

// The float64 values of a float constant: its ConstantData::exact when it
// has them, else its own values.
std::vector<double> ExactValues(const Node* constant);

// The uint8 tensors the passes read activations as: a clip's or an int8
// tensor's cast<u8> (128 added first for int8 values), made once per source.
class Uint8Activations {
 public:
  Node* Get(Graph& graph, const QuantizedActivation& x);
  // Every other reader of a uint8 clip made uint8 here, a select of
  // SimplifyFakeQuant (a residual branch's DequantizeLinear), reads
  // cast<f32>(cast<u8>(c)) instead: the same values, and c's only reader is
  // then the cast to uint8, which fuses into c's kernel, so the activation
  // is stored once, as uint8. `readers` is of the graph before the pass.
  void RewireSelects(Graph& graph, const Readers& readers) const;

 private:
  std::unordered_map<const Node*, Node*> uint8_of_;        // source -> its uint8
  std::vector<std::pair<const Node*, Node*>> selects_of_;  // uint8 clips, in order made
};

// Whether this host runs AVX512-VNNI (with F, BW and VL), which the runtime's
// integer kernels need to be fast.
bool HostHasVnni();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_QDQ_OPERANDS_H_
