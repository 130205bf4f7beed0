// One registration function per op family; OpRegistry::Default() calls them all.
#ifndef KILN_COMPILER_OPS_REGISTER_OPS_H_
#define KILN_COMPILER_OPS_REGISTER_OPS_H_

namespace kiln {

class OpRegistry;

// add, sub, mul, div (NumPy broadcasting), relu, sigmoid, tanh, exp, neg, sqrt, log.
void RegisterElementwiseOps(OpRegistry& registry);
// dense, matmul, softmax, conv2d, batch_norm, dropout.
void RegisterNnOps(OpRegistry& registry);
// reshape, transpose.
void RegisterTransformOps(OpRegistry& registry);
// sum, max (reductions over axes).
void RegisterReduceOps(OpRegistry& registry);
// sin ... atanh, round, ceil, sign, softplus, elu ..., is_nan, is_inf,
// logical_and/or/xor/not, mod.
void RegisterMathOps(OpRegistry& registry);
// conv2d_transpose.
void RegisterConvTransposeOp(OpRegistry& registry);
// cumsum, shift_left, shift_right.
void RegisterScanAndBitOps(OpRegistry& registry);
// einsum.
void RegisterEinsumOp(OpRegistry& registry);
// gather_nd, scatter_elements, scatter_nd, top_k_values, top_k_indices,
// reverse_sequence.
void RegisterIndexOps(OpRegistry& registry);
// grid_sample.
void RegisterGridSampleOp(OpRegistry& registry);
// qconv2d_u8s8.
void RegisterQuantizedConvOp(OpRegistry& registry);
// nonzero, unique (output shapes decided by values).
void RegisterValueShapeOps(OpRegistry& registry);
// attention (FuseAttention's op, a call of kiln_attention_f32).
void RegisterAttentionOp(OpRegistry& registry);
// qmatmul_u8s8.
void RegisterQuantizedMatMulOp(OpRegistry& registry);
// layout_transform, conv2d_nchwc (blocked channels, ConvertLayoutNchwc's ops).
void RegisterLayoutOps(OpRegistry& registry);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_REGISTER_OPS_H_
