// Replaces every op node whose output has no elements by an empty constant,
// so that no kernel is ever made for a zero-size tensor; refuses an op that
// would read a zero-size tensor into a non-empty one, reductions excepted.
#ifndef KILN_COMPILER_PASSES_FOLD_EMPTY_H_
#define KILN_COMPILER_PASSES_FOLD_EMPTY_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFoldEmptyPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FOLD_EMPTY_H_
