#include "engine/batch_rows.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::engine {

absl::StatusOr<std::vector<runtime::Tensor>> JoinRows(
    const std::vector<const std::vector<runtime::Tensor>*>& requests, int64_t run_rows) {
  std::vector<runtime::Tensor> joined;
  if (requests.empty()) return joined;
  for (size_t i = 0; i < requests[0]->size(); ++i) {
    TensorType type = (*requests[0])[i].type();
    if (type.shape.empty()) return absl::InvalidArgumentError("a scalar input has no rows");
    type.shape[0] = run_rows;
    absl::StatusOr<runtime::Tensor> t = runtime::Tensor::AllocateUninitialized(type);
    if (!t.ok()) return t.status();
    char* out = static_cast<char*>(t->data());
    char* const end = out + t->byte_size();
    for (const std::vector<runtime::Tensor>* r : requests) {
      const absl::string_view bytes = (*r)[i].bytes();
      if (static_cast<int64_t>(bytes.size()) > end - out) {
        return absl::InternalError(absl::StrCat("the requests hold more than ", run_rows, " rows"));
      }
      std::memcpy(out, bytes.data(), bytes.size());
      out += bytes.size();
    }
    std::memset(out, 0, end - out);
    joined.push_back(*std::move(t));
  }
  return joined;
}

absl::StatusOr<std::vector<runtime::RunResult>> SplitRows(
    const runtime::RunResult& run, const std::vector<int64_t>& rows, int64_t run_rows,
    const std::vector<std::string>& output_names) {
  std::vector<runtime::RunResult> split(rows.size());
  for (size_t o = 0; o < run.outputs.size(); ++o) {
    const runtime::Tensor& out = run.outputs[o];
    if (out.type().shape.empty() || out.type().shape[0] != run_rows) {
      return absl::InternalError(absl::StrCat(
          "output '", o < output_names.size() ? output_names[o] : "?", "' has shape ",
          ShapeToString(out.type().shape), " for a batch of ", run_rows,
          " rows: its dim 0 is not the batch axis"));
    }
    const int64_t row_bytes = out.byte_size() / run_rows;
    int64_t row = 0;
    for (size_t b = 0; b < rows.size(); ++b) {
      TensorType type = out.type();
      type.shape[0] = rows[b];
      absl::StatusOr<runtime::Tensor> part = runtime::Tensor::FromBytes(
          type, out.bytes().substr(row * row_bytes, rows[b] * row_bytes));
      if (!part.ok()) return part.status();
      split[b].outputs.push_back(*std::move(part));
      row += rows[b];
    }
  }
  for (runtime::RunResult& r : split) {
    r.kernel_times = run.kernel_times;
    r.total_ns = run.total_ns;
  }
  return split;
}

absl::StatusOr<runtime::RunResult> RunPadded(runtime::CompiledModel& model,
                                             const std::vector<runtime::Tensor>& inputs,
                                             int64_t run_rows) {
  if (inputs.empty() || inputs[0].type().shape.empty()) {
    return absl::InvalidArgumentError("a request without a batch axis cannot be padded");
  }
  const int64_t rows = inputs[0].type().shape[0];
  absl::StatusOr<std::vector<runtime::Tensor>> joined = JoinRows({&inputs}, run_rows);
  if (!joined.ok()) return joined.status();
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : *joined) pointers.push_back(&t);
  absl::StatusOr<runtime::RunResult> run = model.Run(pointers);
  if (!run.ok()) return run.status();
  absl::StatusOr<std::vector<runtime::RunResult>> split =
      SplitRows(*run, {rows}, run_rows, model.program().output_names);
  if (!split.ok()) return split.status();
  return std::move((*split)[0]);
}

}  // namespace kiln::engine
