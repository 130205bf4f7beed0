// Requests' tensors joined along dim 0 into one run's inputs (zero rows
// padding it to a compiled batch size), and the run's outputs split back:
// what dynamic batching does per batch, and what serving a request from a
// larger compiled batch does for one request.
#ifndef KILN_ENGINE_BATCH_ROWS_H_
#define KILN_ENGINE_BATCH_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"

namespace kiln::engine {

// Input i of the run is input i of every request, one after another along
// dim 0, then zero rows up to `run_rows`. The requests' dims past 0 agree
// (the caller checked).
absl::StatusOr<std::vector<runtime::Tensor>> JoinRows(
    const std::vector<const std::vector<runtime::Tensor>*>& requests, int64_t run_rows);

// Request b gets rows[b] rows of every output, in order; the padding rows
// are dropped. Internal, naming the output, when one does not keep the
// batch as its dim 0. Each part carries the run's kernel times.
absl::StatusOr<std::vector<runtime::RunResult>> SplitRows(
    const runtime::RunResult& run, const std::vector<int64_t>& rows, int64_t run_rows,
    const std::vector<std::string>& output_names);

// `inputs` (one request of rows = their dim 0) run on `model`, compiled
// for `run_rows` rows: padded, run, and cut back to the request's rows.
absl::StatusOr<runtime::RunResult> RunPadded(runtime::CompiledModel& model,
                                             const std::vector<runtime::Tensor>& inputs,
                                             int64_t run_rows);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_BATCH_ROWS_H_
