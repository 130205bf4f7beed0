// Moves the QDQ pattern around a matrix product onto integer kernels, as
// IntegerQdqConv does for convs. After SimplifyFakeQuant (and FoldConstant) a
// QDQ MatMul or Gemm reads its activation as float integers,
//   matmul(where(c == c, c, 0) - za, w) * s + b   c = clip(v, 0, 255), integral
// and QLinearMatMul as uint8 widened to int32,
//   cast<f32>(matmul(cast<i32>(u) - za, w)) * s
// with w a constant (K, N) (or dense's (N, K)) of integers in int8's range.
// Where the host has AVX512-VNNI either becomes
//   qmatmul_u8s8(cast<u8>(c) or u, packed w, -za * colsum(w), s, b)
// so the activation crosses the kernel boundary as uint8 and the products
// run on vpdpbusd (runtime/qmatmul_u8s8.cc). Elsewhere the graph is left as
// it is.
#ifndef KILN_COMPILER_PASSES_INTEGER_QDQ_MATMUL_H_
#define KILN_COMPILER_PASSES_INTEGER_QDQ_MATMUL_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateIntegerQdqMatMulPass();

// The same pass with the host's VNNI support given, for tests.
std::unique_ptr<Pass> CreateIntegerQdqMatMulPassForTest(bool host_has_vnni);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_INTEGER_QDQ_MATMUL_H_
