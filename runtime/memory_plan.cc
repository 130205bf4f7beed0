// Memory planning by liveness.
//
// An intermediate is live from the kernel that writes it to the last kernel
// that reads it, inclusive. Graph outputs are not in the arena at all: kernels
// write them straight into the tensors handed back to the caller, so a large
// output is neither copied nor held twice. A kernel's inputs are live at the step it
// writes its output, so an output never shares bytes with its own inputs.
// A value that aliases a slice of another (a concat made in place) has no
// bytes of its own: the value holding it is live from the first write to the
// last read of any of its slices or of itself.
// Values are placed largest first at the lowest 64-byte-aligned offset that
// overlaps no value placed earlier whose lifetime intersects its own (greedy
// first fit, as TVM's and XLA's static planners do in spirit).
#include "runtime/memory_plan.h"

#include <algorithm>

namespace kiln::runtime {
namespace {

int64_t Align64(int64_t n) { return (n + 63) / 64 * 64; }

}  // namespace

MemoryPlan PlanMemory(const Program& program) {
  const int n = static_cast<int>(program.values.size());
  const int end = static_cast<int>(program.kernels.size());
  std::vector<int> first(n, -1), last(n, -1);
  for (int k = 0; k < end; ++k) {
    const KernelCall& call = program.kernels[k];
    const int out = call.args.back();
    if (first[out] < 0) first[out] = k;
    last[out] = std::max(last[out], k);
    for (size_t a = 0; a + 1 < call.args.size(); ++a) last[call.args[a]] = k;
  }
  for (int v = 0; v < n; ++v) {
    const int holder = program.values[v].alias_of;
    if (holder < 0 || first[v] < 0) continue;
    first[holder] = first[holder] < 0 ? first[v] : std::min(first[holder], first[v]);
    last[holder] = std::max(last[holder], last[v]);
  }
  std::vector<bool> is_output(n, false);
  for (int out : program.outputs) is_output[out] = true;

  struct Item {
    int value;
    int64_t bytes;
  };
  std::vector<Item> items;
  MemoryPlan plan;
  plan.offsets.assign(n, -1);
  for (int v = 0; v < n; ++v) {
    if (program.values[v].kind != ValueSpec::Kind::kIntermediate || first[v] < 0) continue;
    if (is_output[v] || program.values[v].alias_of >= 0) continue;
    const int64_t bytes = Align64(std::max<int64_t>(1, program.values[v].type.ByteSize()));
    items.push_back({v, bytes});
    plan.naive_bytes += bytes;
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::vector<Item> placed;
  for (const Item& item : items) {
    // Occupied ranges of already-placed values alive at the same time.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Item& p : placed) {
      const bool overlap = first[p.value] <= last[item.value] && first[item.value] <= last[p.value];
      if (overlap) busy.push_back({plan.offsets[p.value], plan.offsets[p.value] + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + item.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[item.value] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + item.bytes);
    placed.push_back(item);
  }
  return plan;
}

}  // namespace kiln::runtime
