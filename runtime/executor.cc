#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/ms_since.h"
#include "common/status_macros.h"
#include "compiler/ir/index_range.h"
#include "runtime/chunk_deadline.h"
#include "runtime/kernel_fault.h"
#include "runtime/thread_pool.h"
#include "runtime/workspace_pool.h"

namespace kiln::runtime {

absl::StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::Create(
    Program program, std::vector<std::shared_ptr<LoadedKernel>> kernels) {
  MemoryPlan plan;
  absl::StatusOr<ModelFootprint> footprint = PlanFootprint(program, &plan);
  if (!footprint.ok()) return footprint.status();
  std::set<const LoadedKernel*> distinct;
  for (const std::shared_ptr<LoadedKernel>& k : kernels) {
    if (k && distinct.insert(k.get()).second) footprint->code_bytes += k->object_bytes();
  }
  std::unique_ptr<CompiledModel> model(new CompiledModel(std::move(program), std::move(kernels)));
  model->constants_.resize(model->program_.values.size());
  for (size_t i = 0; i < model->program_.values.size(); ++i) {
    ValueSpec& v = model->program_.values[i];
    if (v.kind != ValueSpec::Kind::kConstant) continue;
    // Packed weights were laid out as a tensor's bytes by lowering and run
    // as they are (copying resnet18's 45 MB here took ~25 ms after every
    // compile); other constants are copied into an aligned tensor. Either
    // way the program lets go of its reference: the importer's bytes would
    // hold every weight twice for as long as the model is loaded.
    absl::StatusOr<Tensor> t =
        v.constant->bytes.aligned()
            ? Tensor::Adopt(v.type, v.constant->bytes.view(), v.constant)
            : Tensor::FromBytes(v.type, v.constant->bytes.view());
    if (!t.ok()) return t.status();
    model->constants_[i] = *std::move(t);
    v.constant.reset();
  }
  model->plan_ = std::move(plan);
  model->footprint_ = *std::move(footprint);
  const Program& p = model->program_;
  model->index_checks_after_.resize(p.kernels.size() + 1);
  for (size_t c = 0; c < p.index_checks.size(); ++c) {
    int ready = 0;  // an input
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      if (p.kernels[k].args.back() == p.index_checks[c].value) ready = static_cast<int>(k) + 1;
    }
    model->index_checks_after_[ready].push_back(static_cast<int>(c));
  }
  absl::MutexLock lock(&model->stats_mutex_);
  model->kernel_stats_.resize(model->program_.kernels.size());
  return model;
}

absl::StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::CreateRowChunked(
    std::shared_ptr<CompiledModel> chunk_model, int64_t chunks,
    std::shared_ptr<CompiledModel> tail) {
  Program program = chunk_model->program_;
  std::vector<bool> scaled(program.values.size(), false);
  for (const std::vector<int>* ends : {&program.inputs, &program.outputs}) {
    for (int v : *ends) {
      ValueSpec& spec = program.values[v];
      if (spec.type.shape.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", spec.name, "' has no dim 0 to run in row chunks"));
      }
      if (!scaled[v]) spec.type.shape[0] *= chunks;
      scaled[v] = true;
    }
  }
  if (tail != nullptr) {
    const Program& t = tail->program_;
    if (program.outputs.size() != 1 || t.inputs.size() != program.inputs.size() + 1 ||
        !(t.values[t.inputs.back()].type == program.values[program.outputs[0]].type)) {
      return absl::InvalidArgumentError(
          "a whole-batch tail must read the slices' one output, after their inputs");
    }
    // The tail's values after the slices', its inputs read as theirs.
    const int base = static_cast<int>(program.values.size());
    std::vector<int> index(t.values.size());
    for (size_t v = 0; v < t.values.size(); ++v) index[v] = base + static_cast<int>(v);
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      index[t.inputs[i]] = i < program.inputs.size() ? program.inputs[i] : program.outputs[0];
    }
    program.values.insert(program.values.end(), t.values.begin(), t.values.end());
    for (KernelCall k : t.kernels) {
      k.name = kTailKernelPrefix + k.name;
      for (int& a : k.args) a = index[a];
      program.kernels.push_back(std::move(k));
    }
    program.outputs.clear();
    for (int v : t.outputs) program.outputs.push_back(index[v]);
    program.output_names = t.output_names;
  }
  std::unique_ptr<CompiledModel> model(new CompiledModel(std::move(program), {}));
  model->plan_ = chunk_model->plan_;
  // Slices run at once, each with its own arena from the slice model's
  // pool; the slice model's constants, code and first arena are its own
  // footprint (it is a loaded variant as well), not counted again here.
  const int64_t at_once = std::min<int64_t>(chunks, GetParallelThreads());
  model->footprint_.arena_bytes = chunk_model->footprint_.arena_bytes * (at_once - 1);
  model->footprint_.temp_bytes = chunk_model->footprint_.temp_bytes * (at_once - 1);
  model->footprint_.largest_value_bytes = chunk_model->footprint_.largest_value_bytes;
  model->footprint_.largest_value = chunk_model->footprint_.largest_value;
  if (tail != nullptr) {
    // Its weights, code and arena are this model's alone; so is the buffer
    // of the cut value a call takes.
    const ModelFootprint& f = tail->footprint_;
    model->footprint_.constant_bytes += f.constant_bytes;
    model->footprint_.code_bytes += f.code_bytes;
    model->footprint_.arena_bytes +=
        f.arena_bytes +
        chunk_model->program_.values[chunk_model->program_.outputs[0]].type.ByteSize() * chunks;
    model->footprint_.temp_bytes += f.temp_bytes;
  }
  model->row_chunks_ = chunks;
  model->row_chunk_model_ = std::move(chunk_model);
  model->tail_model_ = std::move(tail);
  absl::MutexLock lock(&model->stats_mutex_);
  model->kernel_stats_.resize(model->program_.kernels.size());
  return model;
}

absl::StatusOr<std::unique_ptr<CompiledModel::Workspace>> CompiledModel::TakeWorkspace() {
  {
    absl::MutexLock lock(&workspace_mutex_);
    if (!free_workspaces_.empty()) {
      auto ws = std::move(free_workspaces_.back());
      free_workspaces_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  // One aligned byte arena (shape [bytes], bool elements are one byte each).
  absl::StatusOr<Tensor> arena =
      Tensor::Allocate(TensorType{DType::kBool, {std::max<int64_t>(plan_.arena_bytes, 1)}});
  if (!arena.ok()) return arena.status();
  ws->arena = *std::move(arena);
  return ws;
}

absl::Status CompiledModel::CheckIndices(int k, const std::vector<void*>& pointers) const {
  for (int c : index_checks_after_[k + 1]) {
    const IndexCheck& check = program_.index_checks[c];
    const ValueSpec& v = program_.values[check.value];
    KILN_RETURN_IF_ERROR(CheckIndicesInRange(v.type.dtype, pointers[check.value],
                                             v.type.NumElements(), check.size, check.node));
  }
  return absl::OkStatus();
}

void CompiledModel::ReturnWorkspace(std::unique_ptr<Workspace> ws) {
  absl::MutexLock lock(&workspace_mutex_);
  free_workspaces_.push_back(std::move(ws));
}

absl::StatusOr<RunResult> CompiledModel::Run(const std::vector<const Tensor*>& inputs) {
  return Run(inputs, absl::InfiniteFuture());
}

absl::StatusOr<RunResult> CompiledModel::StartRun(const std::vector<const Tensor*>& inputs) const {
  if (inputs.size() != program_.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model takes ", program_.inputs.size(),
                                                   " inputs, got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueSpec& spec = program_.values[program_.inputs[i]];
    if (inputs[i]->type() != spec.type) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' expects ",
                                                     spec.type.ToString(), ", got ",
                                                     inputs[i]->type().ToString()));
    }
  }
  RunResult result;
  result.outputs.reserve(program_.outputs.size());
  for (int out : program_.outputs) {
    absl::StatusOr<Tensor> t = Tensor::AllocateUninitialized(program_.values[out].type);
    if (!t.ok()) return t.status();
    result.outputs.push_back(*std::move(t));
  }
  return result;
}

absl::StatusOr<RunResult> CompiledModel::Run(const std::vector<const Tensor*>& inputs,
                                             absl::Time deadline) {
  if (row_chunk_model_ != nullptr) return RunRowChunks(inputs, deadline);
  KILN_ASSIGN_OR_RETURN(RunResult result, StartRun(inputs));
  std::vector<const void*> in;
  for (const Tensor* t : inputs) in.push_back(t->data());
  std::vector<void*> out;
  for (Tensor& t : result.outputs) out.push_back(t.data());
  result.kernel_times.reserve(kernels_.size());
  KILN_RETURN_IF_ERROR(RunOnBuffers(in, out, deadline, &result.kernel_times, &result.total_ns));
  RecordRun(result);
  return result;
}

absl::StatusOr<RunResult> CompiledModel::RunRowChunks(const std::vector<const Tensor*>& inputs,
                                                      absl::Time deadline) {
  KILN_ASSIGN_OR_RETURN(RunResult result, StartRun(inputs));
  const int64_t chunks = row_chunks_;
  // With a tail the slices write the cut value, for the whole batch, here.
  std::vector<Tensor> sliced_outputs;
  if (tail_model_ != nullptr) {
    const Program& head = row_chunk_model_->program_;
    TensorType cut = head.values[head.outputs[0]].type;
    cut.shape[0] *= chunks;
    KILN_ASSIGN_OR_RETURN(Tensor buffer, Tensor::AllocateUninitialized(cut));
    sliced_outputs.push_back(std::move(buffer));
  }
  std::vector<Tensor>& slice_outputs = tail_model_ != nullptr ? sliced_outputs : result.outputs;
  std::vector<std::vector<KernelRunTime>> times(chunks);
  std::vector<absl::Status> statuses(chunks);
  const int64_t start = SteadyNowNs();
  // Slice r of a tensor whose dim 0 holds `chunks` slices is its r-th
  // contiguous byte range: rows are dim 0 of a row-major tensor.
  ParallelForOnPool(chunks, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::vector<const void*> in;
      for (const Tensor* t : inputs) {
        in.push_back(static_cast<const char*>(t->data()) + r * (t->type().ByteSize() / chunks));
      }
      std::vector<void*> out;
      for (Tensor& t : slice_outputs) {
        out.push_back(static_cast<char*>(t.data()) + r * (t.type().ByteSize() / chunks));
      }
      int64_t ns = 0;
      statuses[r] = row_chunk_model_->RunOnBuffers(in, out, deadline, &times[r], &ns);
    }
  });
  for (int64_t r = 0; r < chunks; ++r) {
    if (!statuses[r].ok()) return statuses[r];
  }
  // Each kernel's time summed over the slices: the work it did for the call.
  result.kernel_times = std::move(times[0]);
  for (int64_t r = 1; r < chunks; ++r) {
    for (size_t k = 0; k < result.kernel_times.size(); ++k) {
      result.kernel_times[k].ns += times[r][k].ns;
    }
  }
  if (tail_model_ != nullptr) {
    std::vector<const void*> in;
    for (const Tensor* t : inputs) in.push_back(t->data());
    in.push_back(sliced_outputs[0].data());
    std::vector<void*> out;
    for (Tensor& t : result.outputs) out.push_back(t.data());
    std::vector<KernelRunTime> tail_times;
    int64_t ns = 0;
    KILN_RETURN_IF_ERROR(tail_model_->RunOnBuffers(in, out, deadline, &tail_times, &ns));
    for (KernelRunTime& k : tail_times) {
      k.name = kTailKernelPrefix + k.name;
      result.kernel_times.push_back(std::move(k));
    }
  }
  result.total_ns = SteadyNowNs() - start;
  RecordRun(result);
  return result;
}

void CompiledModel::RecordRun(const RunResult& result) {
  last_run_ns_.store(result.total_ns, std::memory_order_relaxed);
  absl::MutexLock lock(&stats_mutex_);
  inference_stats_.Add(result.total_ns);
  for (size_t k = 0; k < result.kernel_times.size() && k < kernel_stats_.size(); ++k) {
    kernel_stats_[k].Add(result.kernel_times[k].ns);
  }
}

absl::Status CompiledModel::RunOnBuffers(const std::vector<const void*>& inputs,
                                         const std::vector<void*>& outputs, absl::Time deadline,
                                         std::vector<KernelRunTime>* times, int64_t* total_ns) {
  const bool has_deadline = deadline != absl::InfiniteFuture();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Workspace> ws, TakeWorkspace());

  std::vector<void*> pointers(program_.values.size(), nullptr);
  for (size_t i = 0; i < program_.values.size(); ++i) {
    if (program_.values[i].kind == ValueSpec::Kind::kConstant) {
      pointers[i] = constants_[i].data();
    } else if (plan_.offsets[i] >= 0) {
      pointers[i] = static_cast<char*>(ws->arena.data()) + plan_.offsets[i];
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    pointers[program_.inputs[i]] = const_cast<void*>(inputs[i]);
  }
  // Kernel-written outputs go straight into the caller's buffers; an output
  // that is an input, a constant, or listed twice is copied after the run.
  std::vector<bool> written_in_place(program_.outputs.size(), false);
  for (size_t o = 0; o < program_.outputs.size(); ++o) {
    const int out = program_.outputs[o];
    if (program_.values[out].kind == ValueSpec::Kind::kIntermediate && pointers[out] == nullptr) {
      pointers[out] = outputs[o];
      written_in_place[o] = true;
    }
  }

  // Slices of a concat made in place point into its bytes, wherever those are.
  for (size_t i = 0; i < program_.values.size(); ++i) {
    const ValueSpec& v = program_.values[i];
    if (v.alias_of >= 0) pointers[i] = static_cast<char*>(pointers[v.alias_of]) + v.alias_offset;
  }

  std::vector<void*> args;
  const int64_t start = SteadyNowNs();
  if (absl::Status s = CheckIndices(-1, pointers); !s.ok()) {
    ReturnWorkspace(std::move(ws));
    return s;
  }
  // The deadline on the steady clock, read between kernels and by the pool
  // before each chunk of a parallel loop.
  std::optional<ChunkDeadline> chunk_deadline;
  std::optional<ScopedChunkDeadline> chunk_deadline_scope;
  if (has_deadline) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    chunk_deadline.emplace(start + std::min(absl::ToInt64Nanoseconds(left), int64_t{1} << 60));
    chunk_deadline_scope.emplace(&*chunk_deadline);
  }
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const KernelCall& call = program_.kernels[k];
    args.clear();
    for (int v : call.args) args.push_back(pointers[v]);
    abi::KernelFault fault;
    args.push_back(&fault);
    const int64_t t0 = SteadyNowNs();
    kernels_[k]->fn()(args.data());
    times->push_back({call.name, SteadyNowNs() - t0});
    if (const int64_t refused = TakeRefusedWorkspaceBytes(); refused > 0) {
      ReturnWorkspace(std::move(ws));
      return RefusedTemporariesStatus(call.name, refused);
    }
    if (chunk_deadline && chunk_deadline->skipped_work()) {
      ReturnWorkspace(std::move(ws));
      return absl::DeadlineExceededError(absl::StrCat(
          "the call's deadline passed inside kernel ", k + 1, " of ", kernels_.size(), " (",
          call.name, "), which stopped at its next parallel chunk; the rest did not run"));
    }
    if (fault.faulted.load(std::memory_order_acquire) != 0) {
      ReturnWorkspace(std::move(ws));
      std::vector<std::string> names;
      for (int v : call.args) names.push_back(program_.values[v].name);
      return KernelFaultStatus(fault, call.name, names);
    }
    if (absl::Status s = CheckIndices(static_cast<int>(k), pointers); !s.ok()) {
      ReturnWorkspace(std::move(ws));
      return s;
    }
    if (chunk_deadline && k + 1 < kernels_.size() && chunk_deadline->Passed()) {
      ReturnWorkspace(std::move(ws));
      return absl::DeadlineExceededError(absl::StrCat(
          "the call's deadline passed after kernel ", k + 1, " of ", kernels_.size(),
          "; the rest did not run"));
    }
  }
  chunk_deadline_scope.reset();  // what follows must run whole
  *total_ns = SteadyNowNs() - start;

  for (size_t o = 0; o < program_.outputs.size(); ++o) {
    if (written_in_place[o]) continue;
    std::memcpy(outputs[o], pointers[program_.outputs[o]],
                program_.values[program_.outputs[o]].type.ByteSize());
  }
  ReturnWorkspace(std::move(ws));
  return absl::OkStatus();
}

ModelTimingStats CompiledModel::TimingStats() const {
  absl::MutexLock lock(&stats_mutex_);
  ModelTimingStats stats;
  stats.inference = inference_stats_.Snapshot();
  for (size_t k = 0; k < kernel_stats_.size(); ++k) {
    stats.kernels.push_back({program_.kernels[k].name, kernel_stats_[k].Snapshot()});
  }
  return stats;
}

}  // namespace kiln::runtime
