// Moves a QDQ product's requantisation into its integer kernel. After the
// integer QDQ passes a product's scaled output is requantised by
// SimplifyFakeQuant's clip, in float32:
//   c = clip(round(relu?(qconv2d_u8s8(...)) / y_scale) + zp, lo, hi)
// read as cast<u8>(c) by the next integer product (cast<u8>(c + 128) for
// int8 values). When the product's output (through an optional Relu or
// Clip) is read by that chain alone, the product becomes its requantising
// form, which computes c in float64 and stores it as uint8 (kiln_qconv_u8s8_q8,
// kiln_qmatmul_u8s8_q8): the casts to uint8 read it as it is, c's other
// readers its float32 value. Float64 with the frontend's exact scales and
// biases (ConstantData::exact) gives the fake-quant definition's rounding
// where float32's flipped near .5; a quarter of the bytes are stored and the
// float32 pass between the kernels goes.
#ifndef KILN_COMPILER_PASSES_REQUANTIZE_IN_KERNEL_H_
#define KILN_COMPILER_PASSES_REQUANTIZE_IN_KERNEL_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateRequantizeInKernelPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_REQUANTIZE_IN_KERNEL_H_
