// Makes softmax(q k^T * scale + mask) v, as PyTorch exports attention (two
// matmuls around a softmax over the last axis, a scalar scale, an added or
// where-selected mask, heads a leading batch dim behind slices, reshapes
// and transposes), one `attention` op that reads q, k and v in place and
// never writes the scores (runtime/attention_f32.cc). Only where the host
// has AVX-512; elsewhere the graph is left as it is.
#ifndef KILN_COMPILER_PASSES_FUSE_ATTENTION_H_
#define KILN_COMPILER_PASSES_FUSE_ATTENTION_H_

#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFuseAttentionPass();

// The same pass with the host's AVX-512 support given, for tests.
std::unique_ptr<Pass> CreateFuseAttentionPassForTest(bool host_has_avx512);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_FUSE_ATTENTION_H_
