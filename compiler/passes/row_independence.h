// Whether a batch's rows stay apart through a graph: what lets the runtime
// run a large batch as slices of a smaller one (CompiledModel::
// CreateRowChunked), each slice a run of the model compiled for its rows.
#ifndef KILN_COMPILER_PASSES_ROW_INDEPENDENCE_H_
#define KILN_COMPILER_PASSES_ROW_INDEPENDENCE_H_

#include <cstdint>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln {

// OkStatus when every input and output of `graph` (types inferred) has
// `rows` rows as dim 0 and each output row depends only on the same rows of
// the inputs, so that slice r of every output (its r-th contiguous part) is
// the model run on slice r of every input. FailedPrecondition naming the
// first node that mixes or drops rows otherwise.
//
// Proved per node from the op's own compute (the index expression every
// op registers). A value "carries rows" on one of its dims: the inputs on
// dim 0, an op's output on the dim at whose index variable its every read
// of a row-carrying input indexes that input's row dim (conv, pool,
// elementwise ops, matmul's rows, softmax over another axis, a transpose,
// which may move the rows to another dim, as PyTorch's attention moves the
// batch to dim 1). A reduction over the rows, a slice, pad, gather, concat
// or flip along them, an op reading a carrying input only for its shape
// (shape, size), or an op without a compute, reads rows in some other way
// and is refused. Reshape is the one op taken on its shape: it keeps the
// elements' row-major order, so the elements before the rows and after a
// row's first stay where they were, and an output dim that splits them
// there holds the rows, whole or merged with other dims ([B, S, D] <->
// [B * S, D], [S, B, E] <-> [S, B * H, E / H] <-> [S * B, E]); the reads
// of a dim holding merged rows must keep it whole. Values computed from
// constants alone
// carry none and are read whole by every slice. The outputs must carry
// their rows on dim 0, where a slice of the caller's tensor is contiguous.
absl::Status CheckRowsIndependent(const Graph& graph, int64_t rows);

// Where a value holds the rows: dim `axis`, of size outer * rows * inner,
// whose index is o * rows * inner + r * inner + i for row r (PyTorch's
// attention merges the batch into [S * B, E]: outer S, inner 1).
struct RowDim {
  int axis = 0;
  int64_t outer = 1;
  int64_t inner = 1;
};

// Whether `n` is a constant of one value repeated (what ConstantOfShape
// makes of a batch-sized shape): any row of it is any other.
bool OneValueRepeated(const Node* n);

// Every value of `graph` that carries rows (the inputs and what is computed
// from them), and where; the errors of CheckRowsIndependent, which this
// also checks.
absl::StatusOr<std::unordered_map<const Node*, RowDim>> RowCarryingValues(const Graph& graph,
                                                                          int64_t rows);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_ROW_INDEPENDENCE_H_
