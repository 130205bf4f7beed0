// Moves the QDQ pattern around a conv onto integer kernels. After
// SimplifyFakeQuant a QDQ conv reads its activation as float integers,
//   conv2d(where(c == c, c, 0) - za, w)      c = clip(v, 0, 255), integral
// with w a constant of integers in int8's range (the centered weight).
// Where the host has AVX512-VNNI it becomes
//   qconv2d_u8s8(cast<u8>(c), packed w, -za * rowsum(w), scale, za)
// so the activation crosses the kernel boundary as uint8 and the products
// run on vpdpbusd (runtime/qconv_u8s8.cc); a following multiply by a
// per-tensor or per-channel constant (the QDQ conv's x_scale * w_scale)
// becomes its scale. Elsewhere the graph is left as it is.
#ifndef KILN_COMPILER_PASSES_INTEGER_QDQ_CONV_H_
#define KILN_COMPILER_PASSES_INTEGER_QDQ_CONV_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateIntegerQdqConvPass();

// The same pass with the host's VNNI support given, for tests.
std::unique_ptr<Pass> CreateIntegerQdqConvPassForTest(bool host_has_vnni);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_INTEGER_QDQ_CONV_H_
