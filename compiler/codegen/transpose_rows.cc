#include "compiler/codegen/transpose_rows.h"

#include <array>

namespace kiln::codegen {
namespace {

// Lane i of a two-input shuffle: operand 0's lanes are 0..15, operand 1's
// 16..31. Within each 128-bit lane q (floats 4q..4q+3):
//   by floats, low:  a[4q] b[4q] a[4q+1] b[4q+1]     (high: +2)
//   by pairs, low:   a[4q] a[4q+1] b[4q] b[4q+1]     (high: +2)
std::array<int, 16> Unpack(bool pairs, bool high) {
  std::array<int, 16> mask{};
  for (int q = 0; q < 4; ++q) {
    const int base = 4 * q + (high ? 2 : 0);
    const int at = 4 * q;
    if (pairs) {
      mask[at] = base;
      mask[at + 1] = base + 1;
      mask[at + 2] = 16 + base;
      mask[at + 3] = 16 + base + 1;
    } else {
      mask[at] = base;
      mask[at + 1] = 16 + base;
      mask[at + 2] = base + 1;
      mask[at + 3] = 16 + base + 1;
    }
  }
  return mask;
}

}  // namespace

std::vector<llvm::Value*> TransposeRows(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows) {
  auto* row_type = llvm::FixedVectorType::get(b.getFloatTy(), kTransposeLanes);
  rows.resize(kTransposeRows, llvm::Constant::getNullValue(row_type));
  auto shuffle = [&](llvm::Value* x, llvm::Value* y, const std::array<int, 16>& mask) {
    return b.CreateShuffleVector(x, y, mask);
  };
  // Round 1, rows 2p and 2p+1 interleaved: t[4h + 2p' + high] for the half
  // h of the rows (0..3, 4..7) and pair p' within it.
  std::array<llvm::Value*, 8> t{};
  for (int h = 0; h < 2; ++h) {
    for (int p = 0; p < 2; ++p) {
      llvm::Value* x = rows[4 * h + 2 * p];
      llvm::Value* y = rows[4 * h + 2 * p + 1];
      t[4 * h + p] = shuffle(x, y, Unpack(false, false));
      t[4 * h + 2 + p] = shuffle(x, y, Unpack(false, true));
    }
  }
  // Round 2: s[4h + j], within 128-bit lane q, holds lane 4q + j of rows
  // 4h..4h+3 (t[4h] and t[4h+1] carry lanes 4q, 4q+1; t[4h+2], t[4h+3] the
  // other two).
  std::array<llvm::Value*, 8> s{};
  for (int h = 0; h < 2; ++h) {
    s[4 * h + 0] = shuffle(t[4 * h + 0], t[4 * h + 1], Unpack(true, false));
    s[4 * h + 1] = shuffle(t[4 * h + 0], t[4 * h + 1], Unpack(true, true));
    s[4 * h + 2] = shuffle(t[4 * h + 2], t[4 * h + 3], Unpack(true, false));
    s[4 * h + 3] = shuffle(t[4 * h + 2], t[4 * h + 3], Unpack(true, true));
  }
  // Round 3: column 4q + j is lane q of s[j] (rows 0..3) then of s[4 + j].
  std::vector<llvm::Value*> columns(kTransposeLanes);
  for (int q = 0; q < 4; ++q) {
    for (int j = 0; j < 4; ++j) {
      std::array<int, 8> mask{};
      for (int i = 0; i < 4; ++i) {
        mask[i] = 4 * q + i;
        mask[4 + i] = 16 + 4 * q + i;
      }
      columns[4 * q + j] = b.CreateShuffleVector(s[j], s[4 + j], mask);
    }
  }
  return columns;
}

}  // namespace kiln::codegen
