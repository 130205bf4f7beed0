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

// A classifier's head (pooled features through dense layers) reads its
// weights once per row: as slices of one row, a batch of 8 streamed
// mobilenet_v3_large's 10 MB of classifier weights 8 times, about 4 of its
// 55 ms (Intel Xeon, 1 thread, a machine shared with builds), against
// 1.2 ms for the two layers run whole. So the slices may stop
// at a cut, the head's last value, and a whole-batch tail computes the rest
// from the slices' results. WholeBatchTailCut finds the cut: the earliest
// value whose descendants (the tail) hold the graph's one output, read
// nothing else computed but the cut and each other, and, like the cut,
// fit in half of L2 for the whole batch; the tail must read a weight of at
// least kTailWeightBytes. Null when there is none. With a cut,
// ChunkRowsFor weighs the head's program alone: the tail's weights stream
// once for the whole batch, not once per slice.
inline constexpr int64_t kTailWeightBytes = 256 << 10;
const Node* WholeBatchTailCut(const Graph& whole, int64_t rows);

// What a tail needs compiled: the graph at a batch of `rows` (as the
// importer makes it) and a compile of any graph. Either unset: no tail.
struct TailCompiler {
  std::function<absl::StatusOr<Graph>(int64_t rows)> graph_for;
  std::function<absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(Graph graph,
                                                                        const std::string& part)>
      compile;
};

// What RowChunkedModel decided, in words, for a log line or kiln-bench.
struct RowChunkReport {
  std::string why_whole;    // the batch runs whole, because ...
  std::string why_no_tail;  // a tail was found but not used, because ...
};

// The model for `whole` (the graph at `rows` rows, types inferred) as
// slices of a smaller batch when its rows are independent and the setting
// (or ChunkRowsFor) says so, and with a whole-batch tail where `tail` can
// compile one and WholeBatchTailCut finds it; null when the batch is better
// run whole (or cannot be split): the caller compiles `whole` then.
// `report` (if given) says why whenever either is not done.
absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> RowChunkedModel(
    const Graph& whole, int64_t rows, RowChunkSetting setting, const ModelForRows& model_for,
    RowChunkReport* report = nullptr, const TailCompiler* tail = nullptr);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_ROW_CHUNKS_H_
