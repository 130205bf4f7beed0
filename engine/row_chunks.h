// A batch run as slices of a smaller batch: the model compiled for the
// slice's rows, run once per slice, the slices side by side on the pool.
//
// Design note. A batch of 8 ran each kernel over all 8 images before the
// next kernel started, so every intermediate was 8 images large: past L2
// (2 MB here) each kernel read its input and wrote its output through
// memory. mobilenet_v2 at batch 8 took 66 ms on one thread where 8 runs of
// batch 1 take 46 (Intel Xeon, 2 cores): its per-image activations fit in
// L2, its batch-8 ones do not. Running the batch as slices keeps a slice's
// intermediates in cache from one kernel to the next (the depth-first
// order of a fused pipeline, at the granularity of the whole model), and
// with several threads the slices run side by side, one per core, each
// single-threaded: no kernel is split across cores and no core waits at
// the end of each parallel loop. The price is the weights: each slice
// streams every weight again, where the whole batch streamed them once per
// kernel. ChunkRowsFor weighs the two.
//
// Only for graphs whose rows are independent (CheckRowsIndependent proves
// it from every op's compute); the results are the whole batch's,
// element for element, since every slice runs the same kernels on the same
// values a whole-batch kernel would (the kernels differ in tiling only,
// which for a reduction can change float rounding within an element: a
// sum's order is the tile's; the tolerance of the tests says so).
#ifndef KILN_ENGINE_ROW_CHUNKS_H_
#define KILN_ENGINE_ROW_CHUNKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/program.h"
#include "runtime/executor.h"

namespace kiln::engine {

// The model compiled (or found compiled) for a batch of `rows`.
using ModelForRows =
    std::function<absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(int64_t rows)>;

// How a batch is split: kAuto by ChunkRowsFor, or never, or into slices of
// a given number of rows (kiln-bench's --row-chunks, for measuring).
struct RowChunkSetting {
  static constexpr int64_t kAuto = 0;
  static constexpr int64_t kOff = -1;
  int64_t rows = kAuto;
};

// The rows of a slice for a batch of `rows` of the model `one_row` (its
// program at one row); `rows` means one run of the whole batch. The
// smallest slices that pay also spread over the most threads, so the
// thread count does not enter.
int64_t ChunkRowsFor(const Program& one_row, int64_t rows);

// The model for `whole` (the graph at `rows` rows, types inferred) as
// slices of a smaller batch when its rows are independent and the setting
// (or ChunkRowsFor) says so; null when the batch is better run whole (or
// cannot be split): the caller compiles `whole` then, and `why_whole`
// (if given) says why.
absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> RowChunkedModel(
    const Graph& whole, int64_t rows, RowChunkSetting setting, const ModelForRows& model_for,
    std::string* why_whole = nullptr);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_ROW_CHUNKS_H_
