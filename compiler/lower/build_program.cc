#include "compiler/lower/build_program.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "compiler/ir/op_cost.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/concat_in_place.h"
#include "compiler/lower/loop_pipeline.h"
#include "compiler/lower/lower_group.h"

namespace kiln {
namespace {

// "dense_add_relu", with runs collapsed ("add_x300") so long chains stay readable.
std::string KernelBaseName(const std::vector<std::string>& ops) {
  std::string name = "fused";
  for (size_t i = 0; i < ops.size();) {
    size_t j = i;
    while (j < ops.size() && ops[j] == ops[i]) ++j;
    absl::StrAppend(&name, "_", ops[i]);
    if (j - i > 1) absl::StrAppend(&name, "_x", j - i);
    i = j;
  }
  if (name.size() > 60) name = absl::StrCat(name.substr(0, 48), "_etc");
  return name;
}

// Lowers each group (roots[i]'s members) as specs[i].name. Groups lower
// independently (each with its own ExprBuilder, reading the graph only), so
// they lower on up to kLowerThreads threads: resnet18's 23 groups took ~46 ms
// on one (quiet Intel Xeon), most of it packing conv weights. The caller
// assembles the program in root order, as one thread would. Cancelled when
// ctx.should_stop says so between groups (asked under a lock: it is the
// caller's function).
constexpr int kLowerThreads = 2;

absl::StatusOr<std::vector<lower::LoweredGroup>> LowerGroups(
    const std::vector<const Node*>& roots,
    const std::map<const Node*, std::vector<const Node*>>& members,
    const std::vector<KernelSpec>& specs, const PassContext& ctx,
    const lower::ScheduleOverrideLookup& overrides, const lower::ContractionKnobs* knobs) {
  std::vector<lower::LoweredGroup> lowered(roots.size());
  // Largest first, so the last group a thread takes is a small one: in root
  // order resnet18's largest weights (packed in lowering) came last and kept
  // one thread busy while the other idled. A group's cost is guessed from
  // the constant bytes its members read (packing copies them) and its size.
  std::vector<size_t> order(roots.size());
  {
    std::vector<int64_t> cost(roots.size(), 0);
    for (size_t i = 0; i < roots.size(); ++i) {
      for (const Node* m : members.at(roots[i])) {
        cost[i] += 4096;
        for (const Node* in : m->inputs) {
          if (in->is_constant()) cost[i] += in->type.ByteSize();
        }
      }
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stopped{false};
  absl::Mutex stop_mutex;
  auto stop_requested = [&] {
    absl::MutexLock lock(&stop_mutex);
    return ctx.should_stop && ctx.should_stop();
  };
  auto worker = [&] {
    for (size_t n = next++; n < roots.size() && !stopped; n = next++) {
      if (stop_requested()) {
        stopped = true;
        return;
      }
      const size_t i = order[n];
      lowered[i] = lower::LowerGroup(members.at(roots[i]), specs[i].name, overrides, knobs);
    }
  };
  const int threads =
      static_cast<int>(std::min<size_t>(kLowerThreads, std::max<size_t>(roots.size(), 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (stopped) {
    return absl::CancelledError(
        "the compile stopped while lowering: its caller left or its deadline passed");
  }
  return lowered;
}

}  // namespace

absl::StatusOr<LoweredProgram> BuildProgram(const Graph& graph, const PassContext& ctx,
                                            const lower::ScheduleOverrideLookup& overrides) {
  LoweredProgram lowered_program;
  Program& program = lowered_program.program;
  program.name = graph.name;
  std::unordered_map<const Node*, int> value_id;
  // Packed constants live until the program has copied what it needs, so no
  // freed Node's address can alias a later one in value_id.
  std::vector<std::unique_ptr<Node>> packed_params;
  auto add_value = [&](const Node* n, ValueSpec::Kind kind) {
    auto it = value_id.find(n);
    if (it != value_id.end()) return it->second;
    ValueSpec v;
    v.kind = kind;
    v.name = n->name;
    v.type = n->type;
    if (kind == ValueSpec::Kind::kConstant) v.constant = n->value;
    program.values.push_back(std::move(v));
    const int id = static_cast<int>(program.values.size()) - 1;
    value_id[n] = id;
    return id;
  };
  for (const Node* in : graph.inputs()) {
    program.inputs.push_back(add_value(in, ValueSpec::Kind::kInput));
  }

  std::vector<Node*> order = graph.TopologicalOrder();
  std::map<const Node*, std::vector<const Node*>> members;
  std::vector<const Node*> roots;
  for (const Node* n : order) {
    if (!n->is_op()) continue;
    if (!n->op->compute) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", n->name, "' (", n->op->name,
          ") has no kernel: it runs only folded, on constant inputs (value_shape_ops.cc)"));
    }
    const Node* root = n->group_root ? n->group_root : n;
    members[root].push_back(n);
    if (root == n) roots.push_back(n);
  }
  // Concats made in place have no kernel: their inputs' kernels write their
  // slices (concat_in_place.cc).
  std::vector<InPlaceConcat> in_place;
  if (std::string reason; ctx.ShouldRun({kConcatInPlaceName, 1, {}}, &reason)) {
    in_place = FindInPlaceConcats(graph, roots, members);
    std::set<const Node*> elided;
    for (const InPlaceConcat& c : in_place) elided.insert(c.concat);
    roots.erase(std::remove_if(roots.begin(), roots.end(),
                               [&](const Node* r) { return elided.count(r) > 0; }),
                roots.end());
  }
  // A root comes after all its members in topological order, so kernels run in
  // root order.
  std::vector<std::unique_ptr<te::ExprBuilder>> builders;
  std::vector<lower::LoopKernel> loop_kernels;
  lowered_program.kernels.reserve(roots.size());
  std::vector<KernelSpec> specs(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    for (const Node* m : members.at(roots[i])) {
      specs[i].ops.push_back(m->op->name);
      specs[i].nodes.push_back(m->name);
      specs[i].flops += OpFlops(*m);
    }
    specs[i].name = absl::StrCat(KernelBaseName(specs[i].ops), "_", i);
  }
  // The host's knobs, unless the options pin another CPU's load cost; then
  // every kernel says so, for the cache to key on.
  lower::ContractionKnobs knobs = lower::HostContractionKnobs();
  std::string knobs_apart;
  if (ctx.config.operand_load_cycles > 0 &&
      ctx.config.operand_load_cycles != knobs.operand_load_cycles) {
    knobs.operand_load_cycles = ctx.config.operand_load_cycles;
    knobs_apart = absl::StrCat("loads ", knobs.operand_load_cycles);
  }
  for (KernelSpec& spec : specs) spec.knobs = knobs_apart;
  KILN_ASSIGN_OR_RETURN(std::vector<lower::LoweredGroup> lowered_groups,
                        LowerGroups(roots, members, specs, ctx, overrides, &knobs));
  for (size_t i = 0; i < roots.size(); ++i) {
    const Node* root = roots[i];
    KernelSpec kernel = std::move(specs[i]);
    KernelCall call;
    call.name = kernel.name;
    call.flops = kernel.flops;
    lower::LoweredGroup& lowered = lowered_groups[i];
    for (const Node* p : lowered.params) {
      call.args.push_back(add_value(
          p, p->is_input() ? ValueSpec::Kind::kInput
                           : (p->is_constant() ? ValueSpec::Kind::kConstant
                                               : ValueSpec::Kind::kIntermediate)));
    }
    call.args.push_back(add_value(root, ValueSpec::Kind::kIntermediate));
    for (int v : call.args) {
      kernel.arg_types.push_back(program.values[v].type);
      kernel.bytes += program.values[v].type.ByteSize();
    }
    kernel.canonical = std::move(lowered.canonical);
    kernel.function = std::move(lowered.function);
    kernel.schedule = std::move(lowered.schedule);
    kernel.contraction = lowered.contraction;
    kernel.tuned = std::move(lowered.tuned);
    kernel.override_ignored = std::move(lowered.override_ignored);
    for (auto& p : lowered.packed_params) packed_params.push_back(std::move(p));
    program.kernels.push_back(std::move(call));
    lowered_program.kernels.push_back(std::move(kernel));
    builders.push_back(std::move(lowered.builder));
    loop_kernels.push_back(
        {&lowered_program.kernels.back().function, builders.back().get(), lowered.scheduled});
  }
  for (const InPlaceConcat& c : in_place) {
    const int holder = add_value(c.concat, ValueSpec::Kind::kIntermediate);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const int slice = add_value(c.inputs[i], ValueSpec::Kind::kIntermediate);
      program.values[slice].alias_of = holder;
      program.values[slice].alias_offset = c.byte_offsets[i];
    }
  }
  KILN_RETURN_IF_ERROR(lower::RunLoopPipeline(loop_kernels, ctx));
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    program.kernels[i].temp_bytes = lower::TemporaryBytes(lowered_program.kernels[i].function);
  }
  const std::string skipped = lower::SkippedLoopPasses(ctx);
  for (KernelSpec& kernel : lowered_program.kernels) kernel.skipped_loop_passes = skipped;
  for (const Node* out : graph.outputs()) {
    ValueSpec::Kind kind = out->is_input() ? ValueSpec::Kind::kInput
                           : out->is_constant() ? ValueSpec::Kind::kConstant
                                                : ValueSpec::Kind::kIntermediate;
    program.outputs.push_back(add_value(out, kind));
  }
  program.output_names = graph.output_names();
  // Indices the program holds in memory are checked as they arrive; ones a
  // fused kernel computes inline it clamps.
  for (const Node* n : order) {
    if (!n->is_op() || !n->op->index_operand) continue;
    std::vector<TensorType> in_types;
    for (const Node* in : n->inputs) in_types.push_back(in->type);
    std::optional<IndexOperand> index = n->op->index_operand(in_types, n->attrs);
    if (!index) continue;
    auto held = value_id.find(n->inputs[index->input]);
    if (held == value_id.end() || program.values[held->second].kind == ValueSpec::Kind::kConstant) {
      continue;  // inline, or a constant InferType checked
    }
    program.index_checks.push_back(
        {held->second, index->size, absl::StrCat("node '", n->name, "' (", n->op->name, ")")});
  }
  return lowered_program;
}

}  // namespace kiln
