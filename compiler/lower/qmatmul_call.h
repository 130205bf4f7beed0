// A group that is a lone qmatmul_u8s8 (compiler/ops/quantized_matmul_op.cc)
// lowers to one call of the runtime's kiln_qmatmul_u8s8, or with int32 output
// kiln_qmatmul_u8s8_i32, requantising kiln_qmatmul_u8s8_q8 (common/kernel_abi.h).
#ifndef KILN_COMPILER_LOWER_QMATMUL_CALL_H_
#define KILN_COMPILER_LOWER_QMATMUL_CALL_H_

#include <optional>

#include "compiler/lower/group_context.h"
#include "compiler/lower/loop_ir.h"

namespace kiln::lower {

// The call, when the group is that op and its operands are buffers of
// the function (a single-element constant is baked instead; the op's compute
// then serves); `out_buffer` is the group's output.
std::optional<Stmt> QMatMulCall(GroupContext& g, int out_buffer);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_QMATMUL_CALL_H_
