// A model whose inputs have symbolic dims, compiled once per concrete input
// shape, on first use (TorchInductor's and JAX's per-shape specialisation,
// with Kiln's kernel cache underneath: a shape whose kernels were compiled
// before, here, by another replica or before a restart, costs a load).
//
// Concurrent first requests for one shape compile it once; the others wait
// for that compile, and requests for shapes already compiled are served
// meanwhile. At most `max_variants` stay loaded: beyond that the least
// recently used one is dropped, and a call still running on it keeps it
// alive until it returns. The server's memory budget may unload a variant
// sooner, the least recently used of every model's that nothing else holds
// (ColdestIdle, UnloadIfIdle), to make room for another. A shape whose
// compile fails for good (the model cannot take it, or it is larger than
// the budget) is remembered with its error, not compiled per request.
//
// Design note: why every shape is specialised, and how a new one is made
// cheap without giving that up.
//
//   request shape S ──▶ loaded? ──yes──▶ run S's kernels (exact, fastest)
//                          │no
//                          ▼
//        batch axis and a larger loaded batch L? ──yes──▶ pad S's rows to L,
//                          │no                          run, cut back; compile
//                          ▼                            S in the background
//               compile S now (single-flight), run
//
// * Kernels are specialised to every extent. Lowering decides by extent:
//   the contraction's tile (ChooseTile), which loops split into an aligned
//   body and a boundary (PartitionBoundaryLoops), what vectorises and what
//   runs in parallel. Kernels taking the batch as a run-time argument would
//   need one schedule good for every extent, and the boundary loops and
//   tile choice they lose are where Kiln's speed comes from; TVM's Relax and
//   Inductor's dynamic=True pay that way. Specialised, a variant runs as
//   fast as a model compiled for that shape alone: bench/shapes.sh measured
//   0.97-1.06x over resnet18 batches 1..32 (Intel Xeon, 2 cores).
// * The price is a compile per new shape: 0.8-1.6 s for resnet18 on the
//   request path. Two things keep it off the request path. A model loads
//   its declared eager shapes (TensorRT's profile shapes). And for a model
//   with a batch axis (every input and output sharing a symbolic dim 0, so
//   rows are independent), a request of a batch not compiled yet runs on the
//   loaded variant with the fewest rows that hold it, zero-padded, while its
//   own shape compiles on the engine's background worker: its first request
//   took 113-155 ms from batch 4 instead of 925-1152 ms compile-and-wait for
//   batches 1-3. Padding is never applied to another axis (a sequence length
//   changes what attention computes).
// * Dynamic batching pads a formed batch to a preferred size (or a power of
//   two), so mixed traffic compiles a handful of batch shapes, not one per
//   size (dynamic_batcher.h).
#ifndef KILN_ENGINE_SHAPE_VARIANTS_H_
#define KILN_ENGINE_SHAPE_VARIANTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"
#include "engine/row_chunks.h"
#include "runtime/executor.h"

namespace kiln::engine {

// Concrete shapes by input name.
using ShapeBinding = std::map<std::string, std::vector<int64_t>>;
// Values of the inputs that decide shapes, by input name.
using ValueBinding = std::map<std::string, std::vector<int64_t>>;
// The model's graph with its inputs at the given shapes, and the inputs
// that decide shapes bound to the given values (the importer, run again
// with those fixed).
using GraphForShapes =
    std::function<absl::StatusOr<Graph>(const ShapeBinding& shapes, const ValueBinding& values)>;
// What a variant is compiled for: every input's shape, in the signature's
// order, then the values of the inputs that decide shapes, in that order.
using VariantKey = std::vector<std::vector<int64_t>>;
// Compiles a graph into a servable model (through the kernel cache).
using CompileVariant =
    std::function<absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(Graph graph)>;

// The sizes a named symbol ("batch") may take, both ends included
// (TensorRT's optimisation-profile min and max).
struct SymbolRange {
  int64_t min = 1;
  int64_t max = 0;
};
using SymbolRanges = std::map<std::string, SymbolRange>;
// Sizes by symbol name: one concrete shape of the model.
using SymbolBinding = std::map<std::string, int64_t>;

// The input shapes (in the signature's order) `binding` gives: each named
// symbolic dim its symbol's size, an unnamed one 1. InvalidArgument naming
// a symbol the binding lacks or one the model does not have.
absl::StatusOr<std::vector<std::vector<int64_t>>> BindSymbols(const ModelSignature& signature,
                                                              const SymbolBinding& binding);

// "x=[4,24] n=[1,3]" (shapes by input name, then the values of the inputs
// that decide shapes as "name=values"), for messages and logs.
std::string VariantKeyToString(const ModelSignature& signature, const VariantKey& key);

// InvalidArgument unless every range names a symbol of `signature` and
// has 1 <= min <= max.
absl::Status ValidateSymbolRanges(const ModelSignature& signature, const SymbolRanges& ranges);

class ShapeVariants : public std::enable_shared_from_this<ShapeVariants> {
 public:
  // Runs a task away from the caller; `cancelled` when it will not run.
  using Schedule = std::function<void(std::function<void(bool cancelled)>)>;

  // A request whose named symbol falls outside `ranges` is refused.
  ShapeVariants(ModelSignature signature, SymbolRanges ranges, GraphForShapes graph_for,
                CompileVariant compile, int max_variants);

  const ModelSignature& signature() const { return signature_; }
  // How a batch of rows may run as slices of a smaller one (row_chunks.h);
  // set before the first Get.
  void set_row_chunks(RowChunkSetting setting) { row_chunks_ = setting; }

  // Registers `model`, compiled for `shapes` (one per input, in order).
  void Add(const std::vector<std::vector<int64_t>>& shapes,
           std::shared_ptr<runtime::CompiledModel> model);

  // The model for `shapes` (one per input, in the signature's order),
  // compiled now if no variant has them. InvalidArgument, naming the input
  // and the dim, when they cannot be the model's: another rank, a fixed dim
  // that differs, a negative symbolic dim (0 is an empty tensor), or one
  // symbol bound two ways.
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> Get(
      const std::vector<std::vector<int64_t>>& shapes);

  // The variant for `shapes` if it is compiled and loaded; null otherwise
  // (never compiles, never waits).
  std::shared_ptr<runtime::CompiledModel> Peek(const std::vector<std::vector<int64_t>>& shapes);

  // OkStatus when `shapes` could be the model's; else the InvalidArgument
  // Get would give (naming the input, the dim and, for a declared range,
  // the range).
  absl::Status Check(const std::vector<std::vector<int64_t>>& shapes) const;

  // A loaded variant a request of `shapes` can be padded into: the one with
  // the fewest rows that differs only by a larger dim 0, the same in every
  // input. Null when none.
  struct LargerBatch {
    std::shared_ptr<runtime::CompiledModel> model;
    int64_t rows = 0;
  };
  std::optional<LargerBatch> FindLargerBatch(const std::vector<std::vector<int64_t>>& shapes);

  // Starts compiling `shapes` through `schedule` unless they are loaded,
  // compiling, known to fail or not the model's; callers of Get for them
  // meanwhile wait for that compile. Call on an object a shared_ptr owns.
  void CompileSoon(const std::vector<std::vector<int64_t>>& shapes, const Schedule& schedule);

  // The variants loaded now (compiled and not evicted), by input shapes.
  std::vector<std::pair<std::vector<std::vector<int64_t>>, std::shared_ptr<runtime::CompiledModel>>>
  Loaded() const;

  // Variants compiled on demand so far (not counting Add).
  int64_t compiles() const;
  // How long the last successful on-demand compile took (a load, when its
  // kernels were cached); 0 before the first.
  int64_t last_compile_ns() const { return last_compile_ns_.load(std::memory_order_relaxed); }

  // The least recently used loaded variant that nothing but this set holds
  // (no call runs on it, no model keeps it as its load-time shape), so that
  // unloading it frees it: its key and last use, on a clock every model's
  // variants share. Nullopt when there is none.
  struct IdleVariant {
    VariantKey key;
    uint64_t last_use = 0;
  };
  std::optional<IdleVariant> ColdestIdle() const;
  // Unloads the variant for `key` if it is loaded and still idle, returning
  // its last owner for the caller to let go; null otherwise. A request for
  // it later compiles it again.
  std::shared_ptr<runtime::CompiledModel> UnloadIfIdle(const VariantKey& key);

 private:
  struct Slot {
    bool ready = false;
    absl::Status status;
    std::shared_ptr<runtime::CompiledModel> model;
    uint64_t last_use = 0;
  };

  // Compiles `shapes` into `slot`, claimed for them, and wakes its waiters.
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> Fill(
      const std::vector<std::vector<int64_t>>& shapes, const std::shared_ptr<Slot>& slot);
  // The model for `shapes` as slices of a smaller batch's variant
  // (row_chunks.h), or null to compile `graph` whole.
  std::shared_ptr<runtime::CompiledModel> AsRowChunks(
      const std::vector<std::vector<int64_t>>& shapes, const Graph& graph);
  // Ends `slot`, claimed for `shapes`, with `status` (no compile).
  void Abandon(const std::vector<std::vector<int64_t>>& shapes, const std::shared_ptr<Slot>& slot,
               const absl::Status& status);
  // `slot`'s model once its compile is done (waiting for it), or its error.
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> Await(Slot& slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EvictBeyondBound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const ModelSignature signature_;
  const SymbolRanges ranges_;
  const GraphForShapes graph_for_;
  const CompileVariant compile_;
  const int max_variants_;
  RowChunkSetting row_chunks_;

  mutable absl::Mutex mutex_;
  absl::CondVar compiled_;
  std::map<std::vector<std::vector<int64_t>>, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mutex_);
  int64_t compiles_ ABSL_GUARDED_BY(mutex_) = 0;
  std::atomic<int64_t> last_compile_ns_{0};
};

// Whether a request of a batch size not compiled yet is served from a larger
// loaded batch, padded, while its own compiles (the design note above), or
// waits for that compile: padded when the larger batch's last run
// (`padded_run_ns`) is shorter than the model's last compile (`compile_ns`),
// or either is not known yet. A padded batch 32 of a large model can take
// longer than compiling batch 1 now that a compile takes a few hundred ms.
bool ServePaddedWhileCompiling(int64_t padded_run_ns, int64_t compile_ns);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_SHAPE_VARIANTS_H_
