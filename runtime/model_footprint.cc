#include "runtime/model_footprint.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tensor.h"

namespace kiln::runtime {

absl::StatusOr<ModelFootprint> PlanFootprint(const Program& program, MemoryPlan* plan) {
  ModelFootprint footprint;
  // An output goes by the name the graph declared it with (its value may
  // be a renamed node's, or unnamed: an ONNX graph output).
  std::vector<std::string> names(program.values.size());
  for (size_t i = 0; i < program.values.size(); ++i) names[i] = program.values[i].name;
  for (size_t o = 0; o < program.outputs.size() && o < program.output_names.size(); ++o) {
    if (!program.output_names[o].empty()) names[program.outputs[o]] = program.output_names[o];
  }
  // Every size is checked before any is multiplied out: a shape from a
  // request may overflow int64 (issue 20: a 128 GiB input compiled and
  // loaded, failing only at its first request).
  for (size_t i = 0; i < program.values.size(); ++i) {
    const ValueSpec& v = program.values[i];
    absl::StatusOr<int64_t> n = CheckedNumElements(v.type.shape);
    if (!n.ok() || *n > kMaxTensorBytes / DTypeSize(v.type.dtype)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "value '", names[i], "' (", v.type.ToString(), ") is larger than the runtime's ",
          kMaxTensorBytes >> 30, " GiB limit for one tensor"));
    }
    const int64_t bytes = *n * DTypeSize(v.type.dtype);
    if (v.kind == ValueSpec::Kind::kConstant) footprint.constant_bytes += bytes;
    if (bytes > footprint.largest_value_bytes || footprint.largest_value.empty()) {
      footprint.largest_value_bytes = bytes;
      footprint.largest_value = absl::StrCat("value '", names[i], "' (", v.type.ToString(), ")");
    }
  }
  MemoryPlan planned = PlanMemory(program);
  if (planned.arena_bytes > kMaxTensorBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model's intermediates need ", planned.arena_bytes >> 20,
        " MiB at once, more than the runtime's ", kMaxTensorBytes >> 30, " GiB limit"));
  }
  footprint.arena_bytes = planned.arena_bytes;
  for (const KernelCall& k : program.kernels) {
    if (k.temp_bytes > kMaxTensorBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "kernel ", k.name, "'s temporaries need ", k.temp_bytes >> 20,
          " MiB at once, more than the runtime's ", kMaxTensorBytes >> 30, " GiB limit"));
    }
    footprint.temp_bytes = std::max(footprint.temp_bytes, k.temp_bytes);
  }
  if (plan != nullptr) *plan = std::move(planned);
  return footprint;
}

}  // namespace kiln::runtime
