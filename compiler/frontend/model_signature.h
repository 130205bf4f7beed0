// A model's inputs and outputs as the model declares them, symbolic
// dimensions included (ONNX dim_param, or a dim with no value): what shapes
// a request may bring, and what KServe's ModelMetadata reports (-1 for a
// symbolic dim). The graph a model compiles to has concrete shapes only; the
// engine keeps this beside it to compile other shapes on demand.
#ifndef KILN_COMPILER_FRONTEND_MODEL_SIGNATURE_H_
#define KILN_COMPILER_FRONTEND_MODEL_SIGNATURE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/ir/tensor_type.h"

namespace kiln {

// The values of an input that decides shapes travel as int64s (variant
// keys, OnnxImportOptions::input_values): integers as they are, a float
// input's values as the bits of each one's double, exact for float32 and
// float64 alike.
inline int64_t DecidingValueFromDouble(double v) {
  int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}
inline double DoubleFromDecidingValue(int64_t bits) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// A float or bool input decides shapes only when it holds at most this many
// values (scales, a depth, a Compress condition): a larger one is data, and
// specialising on it would compile a variant per request.
inline constexpr int64_t kMaxFloatDecidingValues = 64;

struct TensorSignature {
  static constexpr int64_t kSymbolicDim = -1;

  std::string name;
  DType dtype = DType::kFloat32;
  // A dim's size, or kSymbolicDim where the model leaves it open.
  std::vector<int64_t> dims;
  // Per dim, the symbol's name ("batch"), empty for a fixed dim or an
  // unnamed symbolic one. Input dims that share a name must agree.
  std::vector<std::string> symbols;
  // Whether `dims` is known at all (an ONNX output may declare no shape).
  bool has_shape = true;
  // An input whose values decide shapes (a Reshape's target, a Resize's
  // scales): each value compiles a graph of its own, where the input is a
  // constant. Integer inputs, or small float or bool ones (kMaxFloatDecidingValues).
  bool decides_shapes = false;

  bool IsSymbolic() const {
    for (int64_t d : dims) {
      if (d == kSymbolicDim) return true;
    }
    return false;
  }
};

struct ModelSignature {
  std::vector<TensorSignature> inputs;   // in the model's order, initializers excluded
  std::vector<TensorSignature> outputs;  // in the model's order

  // Whether one compiled graph cannot serve every request: a symbolic dim,
  // or an input whose values decide shapes.
  bool IsSymbolic() const {
    for (const TensorSignature& t : inputs) {
      if (t.IsSymbolic() || t.decides_shapes) return true;
    }
    return false;
  }
};

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_MODEL_SIGNATURE_H_
