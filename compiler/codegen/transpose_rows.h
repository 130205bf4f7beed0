// A register tile's rows turned into its columns with in-register shuffles.
//
// Channel-lanes convs (contraction_schedule.cc) hold an output tile of up to
// 8 pixels (rows) x 16 channels (lanes) in registers, but NCHW output keeps
// each channel's pixels contiguous and the channels a plane apart. Stored row
// by row, each row is a 16-lane scatter: replacing those scatters with a
// (wrong) contiguous store made resnet18's 64-channel 3x3 convs (K = 576)
// 10% faster, so they cost about a tenth of the conv. Transposed, the
// tile is 16 masked 8-lane stores of a channel's pixels each.
#ifndef KILN_COMPILER_CODEGEN_TRANSPOSE_ROWS_H_
#define KILN_COMPILER_CODEGEN_TRANSPOSE_ROWS_H_

#include <vector>

#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen {

// The most rows TransposeRows takes, and the lanes of each row.
inline constexpr int kTransposeRows = 8;
inline constexpr int kTransposeLanes = 16;

// `rows` (at most 8 values of <16 x float>) as 16 columns of <8 x float>:
// column l holds rows[0][l], rows[1][l], ...; lanes past the last row are 0.
// Three rounds of two-input shuffles that x86 has single instructions for
// (unpack within 128-bit lanes by floats, then by pairs, then a permute
// across two registers), instead of 16 x 8 element moves.
std::vector<llvm::Value*> TransposeRows(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows);

}  // namespace kiln::codegen

#endif  // KILN_COMPILER_CODEGEN_TRANSPOSE_ROWS_H_
