// A graph whose batch is fixed (an export with batch 8 baked in), at
// another number of rows: what lets such a model run as slices
// (engine/row_chunks.h) though no importer can give it at another batch.
#ifndef KILN_COMPILER_PASSES_GRAPH_AT_ROWS_H_
#define KILN_COMPILER_PASSES_GRAPH_AT_ROWS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln {

// `graph` (types inferred, `rows` rows as every input's dim 0, rows
// independent: CheckRowsIndependent) at `new_rows` rows: every value that
// carries rows has them resized where it holds them (RowCarryingValues),
// reshapes', expands' and slices' sizes with them; nodes keep their names and
// ids. Types are then inferred again and must come out as resized: a value
// still holding the batch size (a constant as tall as the batch that a row
// is added to, say) is refused (FailedPrecondition naming it) rather than
// computing something else at the new size.
absl::StatusOr<Graph> GraphAtRows(const Graph& graph, int64_t rows, int64_t new_rows);

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_GRAPH_AT_ROWS_H_
