// A compiled model: kernels in order over preallocated buffers, timed per kernel.
#ifndef KILN_RUNTIME_EXECUTOR_H_
#define KILN_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compiler/program.h"
#include "runtime/duration_stats.h"
#include "runtime/jit_engine.h"
#include "runtime/memory_plan.h"
#include "runtime/model_footprint.h"
#include "runtime/tensor.h"

namespace kiln::runtime {

// Before the names of a row-chunked model's whole-batch tail kernels, in
// its program and its run times.
inline constexpr char kTailKernelPrefix[] = "tail.";

struct KernelRunTime {
  std::string name;
  int64_t ns = 0;
};

struct RunResult {
  std::vector<Tensor> outputs;  // the program's outputs, in order
  std::vector<KernelRunTime> kernel_times;
  int64_t total_ns = 0;
};

struct KernelTimingStats {
  std::string name;
  DurationSnapshot durations;
};

struct ModelTimingStats {
  DurationSnapshot inference;
  std::vector<KernelTimingStats> kernels;  // in execution order
};

class CompiledModel {
 public:
  // `kernels[i]` runs program.kernels[i]. Copies constants into aligned tensors.
  // ResourceExhausted as PlanFootprint, before anything is allocated.
  static absl::StatusOr<std::unique_ptr<CompiledModel>> Create(
      Program program, std::vector<std::shared_ptr<LoadedKernel>> kernels);
  // A model for `chunks` times the rows of `chunk_model`, whose rows (dim 0
  // of every input and output) are independent: it runs `chunk_model` once
  // per slice of `chunk_model`'s rows, the slices in parallel on the pool
  // (each single-threaded), reading and writing the caller's tensors in
  // place. Its program is `chunk_model`'s with each input's and output's
  // dim 0 multiplied by `chunks`; its kernels, constants and per-call arena
  // are `chunk_model`'s (one arena per slice running at once).
  // InvalidArgument unless every input and output has a dim 0.
  //
  // With a `tail` (engine/row_chunks.h's whole-batch tail), `chunk_model`'s
  // one output is the cut value: the slices write it for the whole batch
  // into a buffer of the call's, and `tail` (whose inputs are
  // `chunk_model`'s, at the whole batch and unread, then the cut value)
  // computes the outputs from it. The program then lists the slices'
  // kernels, then the tail's (named with kTailKernelPrefix before theirs).
  static absl::StatusOr<std::unique_ptr<CompiledModel>> CreateRowChunked(
      std::shared_ptr<CompiledModel> chunk_model, int64_t chunks,
      std::shared_ptr<CompiledModel> tail = nullptr);

  const Program& program() const { return program_; }
  // Slices a call's rows are run in (1: one run of the whole batch).
  int64_t row_chunks() const { return row_chunks_; }

  // Runs with `inputs` in the program's input order; their types must match
  // (checked here as a last line of defence: InvalidArgument naming the input).
  absl::StatusOr<RunResult> Run(const std::vector<const Tensor*>& inputs);
  // As Run, DeadlineExceeded when `deadline` passes between two kernels
  // (the rest are not run).
  absl::StatusOr<RunResult> Run(const std::vector<const Tensor*>& inputs, absl::Time deadline);

  ModelTimingStats TimingStats() const;
  // The last call's kernel time (0 before any): a cheap guess at the next
  // one's, for a dispatcher deciding where to run it.
  int64_t last_run_ns() const { return last_run_ns_.load(std::memory_order_relaxed); }
  // Bytes one call needs for intermediates, after and before liveness sharing.
  int64_t intermediate_bytes() const { return plan_.arena_bytes; }
  int64_t unplanned_intermediate_bytes() const { return plan_.naive_bytes; }
  // What it holds while loaded: constants, one call's arena, its kernels' code.
  // A model made by CreateRowChunked holds only the arenas its slices take
  // beyond the one of row_chunk_model(), whose footprint is its own, and
  // its whole-batch tail (weights, code, arena and the cut value's buffer).
  const ModelFootprint& footprint() const { return footprint_; }
  // The model each slice runs on, for one made by CreateRowChunked; else null.
  const CompiledModel* row_chunk_model() const { return row_chunk_model_.get(); }

 private:
  // Intermediate buffers for one call. A call takes a free set or makes one,
  // so concurrent calls never share buffers and steady state allocates nothing.
  struct Workspace {
    Tensor arena;  // every intermediate, at the offsets of plan_
  };

  CompiledModel(Program program, std::vector<std::shared_ptr<LoadedKernel>> kernels)
      : program_(std::move(program)), kernels_(std::move(kernels)) {}
  // The inputs' types against the program's, then output tensors for them.
  absl::StatusOr<RunResult> StartRun(const std::vector<const Tensor*>& inputs) const;
  // Runs every kernel with the program's inputs at `inputs` and its outputs
  // written to `outputs` (one per program output, of its byte size),
  // appending each kernel's time to `times` and the whole to `total_ns`.
  absl::Status RunOnBuffers(const std::vector<const void*>& inputs,
                            const std::vector<void*>& outputs, absl::Time deadline,
                            std::vector<KernelRunTime>* times, int64_t* total_ns);
  // Run for a model made by CreateRowChunked.
  absl::StatusOr<RunResult> RunRowChunks(const std::vector<const Tensor*>& inputs,
                                         absl::Time deadline);
  void RecordRun(const RunResult& result);
  absl::StatusOr<std::unique_ptr<Workspace>> TakeWorkspace();
  void ReturnWorkspace(std::unique_ptr<Workspace> ws);
  // The program's index checks on values ready after kernel `k` (-1: the
  // inputs), over the values' memory.
  absl::Status CheckIndices(int k, const std::vector<void*>& pointers) const;

  Program program_;
  std::vector<std::shared_ptr<LoadedKernel>> kernels_;
  std::vector<Tensor> constants_;  // indexed like program_.values
  MemoryPlan plan_;
  ModelFootprint footprint_;
  // program_.index_checks by the kernel after which their value is ready,
  // offset by one (0: the inputs, before any kernel).
  std::vector<std::vector<int>> index_checks_after_;
  // Set by CreateRowChunked: what runs each slice, and how many slices.
  std::shared_ptr<CompiledModel> row_chunk_model_;
  int64_t row_chunks_ = 1;
  std::shared_ptr<CompiledModel> tail_model_;  // may be null

  absl::Mutex workspace_mutex_;
  std::vector<std::unique_ptr<Workspace>> free_workspaces_ ABSL_GUARDED_BY(workspace_mutex_);

  std::atomic<int64_t> last_run_ns_{0};
  mutable absl::Mutex stats_mutex_;
  DurationStats inference_stats_ ABSL_GUARDED_BY(stats_mutex_);
  std::vector<DurationStats> kernel_stats_ ABSL_GUARDED_BY(stats_mutex_);
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_EXECUTOR_H_
