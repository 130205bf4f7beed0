// Lowering a fused group to one loop function.
//
// 1. Parameters: the group's inputs from outside it, in first-use order, then
//    the output. Single-element constants are baked in as immediates instead.
// 2. Inlining: the root's element is built by calling its op's compute with
//    accessors that, for a producer inside the group, call the producer's compute
//    in turn (memoised by (node, indices), and Exprs are interned, so shared
//    producers become shared DAG nodes, not copies). Every op, reductions
//    included, is inlined into one expression for the output element.
// 3. Reduction hoisting: a Reduce that depends on fewer loop variables than the
//    loops around it (softmax's row max inside an (i, j) loop) would be
//    recomputed for every j. It is materialised instead: a temporary buffer
//    indexed by the variables it does depend on, filled by its own loop nest
//    before the main one. Innermost reductions are hoisted first, and equal
//    reductions share one temporary (interning makes them the same pointer).
//    A Reduce that depends on every surrounding variable (dense's dot product)
//    stays inline: codegen keeps its accumulator in a register.
// 4. Flattening: multi-dim Loads become one row-major element index.
// 5. Schedule: each loop nest's outer loop is parallel when the work is
//    large enough, and its innermost loop is vectorized. A reduction along
//    the innermost output dim is turned inside out (row_reduction.cc); a
//    lone pool prefetches its next input plane (plane_prefetch.cc). (A lone
//    max pool, or stride-1 average pool, takes pool_planes.cc's passes
//    before step 3 instead.) When
//    every temporary of step 3 is a value of an output row (LayerNorm's mean
//    and variance, softmax's max and sum), the stages become one nest over
//    the rows instead (RowStages): each row's values, then its outputs.
// 6. A group whose value is a single sum of products (dense, matmul, conv2d
//    with their epilogues) gets the packed, register-tiled schedule of
//    contraction_schedule.cc instead of steps 3 and 5, a conv's input padded
//    for it by conv_padding.cc; a lone qconv2d_u8s8 or qmatmul_u8s8 becomes a
//    call of the runtime's VNNI kernel (qconv_call.cc, qmatmul_call.cc), a
//    lone attention one of its attention kernel (attention_call.cc).
// What the steps share (parameters, shapes, the builder, the inliner) is
// the GroupContext (group_context.h). The loop passes (loop_pipeline.h) run
// on the result later.
#include "compiler/lower/lower_group.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/attention_call.h"
#include "compiler/lower/blocked_conv.h"
#include "compiler/lower/blocked_depthwise.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/lower/conv_padding.h"
#include "compiler/lower/group_context.h"
#include "compiler/lower/plane_prefetch.h"
#include "compiler/lower/pool_planes.h"
#include "compiler/lower/qconv_call.h"
#include "compiler/lower/qmatmul_call.h"
#include "compiler/lower/row_reduction.h"
#include "compiler/lower/row_stages.h"
#include "compiler/lower/winograd_conv.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

class GroupLowerer {
 public:
  GroupLowerer(const std::vector<const Node*>& members, const ContractionKnobs* knobs)
      : g_(members), knobs_(knobs) {}

  LoweredGroup Lower(const std::string& name, const ScheduleOverrideLookup& overrides) {
    LoweredGroup out;
    // 1. Parameters.
    CollectParams();
    out.params = g_.params;
    out.canonical = Canonical();
    if (overrides) override_ = overrides(out.canonical);
    const Node* root = g_.members.back();

    // 2. Inlining: the root's element at the output's loop variables.
    std::vector<Var> out_vars;
    std::vector<Expr> out_idx;
    for (size_t d = 0; d < root->type.shape.size(); ++d) {
      out_vars.push_back(b_.NewVar("i" + std::to_string(d), root->type.shape[d]));
      out_idx.push_back(b_.Ref(out_vars.back()));
    }
    Expr value = g_.ValueOf(root, out_idx);

    LoopFunction& fn = out.function;
    fn.name = name;
    bool narrow_constant = false;
    for (const Node* p : g_.params) {
      fn.buffers.push_back(ParamBuffer(p));
      narrow_constant |= fn.buffers.back().storage.has_value() && p->is_constant();
      g_.shapes.push_back(p->type.shape);
    }
    fn.buffers.push_back(ParamBuffer(root));
    g_.shapes.push_back(root->type.shape);
    fn.num_params = static_cast<int>(fn.buffers.size());

    // A QDQ conv on VNNI is a call of the runtime's kernel.
    if (std::optional<Stmt> call = QConvCall(g_, fn.num_params - 1)) {
      fn.body = *call;
      out.schedule = "qconv u8s8 (kiln_qconv_u8s8)";
      out.scheduled = true;
      out.builder = std::move(g_.builder);
      return out;
    }
    // So is attention, on its streaming kernel.
    if (std::optional<Stmt> call = AttentionCall(g_, fn.num_params - 1)) {
      fn.body = *call;
      out.schedule = "attention (kiln_attention_f32)";
      out.scheduled = true;
      out.builder = std::move(g_.builder);
      return out;
    }
    if (std::optional<Stmt> call = QMatMulCall(g_, fn.num_params - 1)) {
      fn.body = *call;
      out.schedule = "qmatmul u8s8 (kiln_qmatmul_u8s8)";
      out.scheduled = true;
      out.builder = std::move(g_.builder);
      return out;
    }

    // A blocked depthwise conv: register tiles of pixels (blocked_depthwise.cc).
    if (Stmt dw = LowerBlockedDepthwise(g_, fn, out.schedule)) {
      fn.body = dw;
      out.scheduled = true;
      out.builder = std::move(g_.builder);
      return out;
    }

    // 6. Contractions take their own schedule (and skip 3 and 5). Their loads
    // and stores go through codegen, which widens and narrows any element
    // type (a QDQ conv reads uint8 and writes uint8); only constants they
    // pack at compile time are read as float32 directly.
    if (!narrow_constant && TryContraction(out, out_vars, value)) {
      out.scheduled = true;
      out.builder = std::move(g_.builder);
      return out;
    }

    // A lone pool runs plane by plane in flat passes (pool_planes.cc), taken
    // before hoisting would take an average pool's window count apart.
    if (Stmt pool = PoolOverPlanes(g_, out_vars, fn.num_params - 1, value, fn.buffers)) {
      fn.body = pool;
      out.builder = std::move(g_.builder);
      return out;
    }

    // 3. Reduction hoisting.
    VarSet enclosing;
    for (const Var& v : out_vars) {
      if (v->extent != 1) enclosing.insert(v.get());
    }
    std::unordered_map<const te::ExprNode*, Expr> memo;
    value = Hoist(value, enclosing, memo);
    const int first_temp = fn.num_params;
    for (size_t t = 0; t < temps_.size(); ++t) {
      std::vector<int64_t> shape;
      int64_t n = 1;
      for (const Var& v : temps_[t].vars) {
        shape.push_back(v->extent);
        n *= v->extent;
      }
      fn.buffers.push_back({absl::StrCat("tmp", t), temps_[t].value->type, n});
      g_.shapes.push_back(shape);
    }
    // Temp loads were created with placeholder ids; shift them past the params.
    g_.temp_base = first_temp;

    // 4 and 5. Each stage's loop nest, flattened and scheduled; row values
    // computed row by row where they allow it.
    if (Stmt rows = RowStages(g_, out_vars, fn.num_params - 1, temps_, first_temp, value,
                              fn.buffers)) {
      fn.body = rows;
      out.builder = std::move(g_.builder);
      return out;
    }
    std::vector<Stmt> stages;
    for (size_t t = 0; t < temps_.size(); ++t) {
      stages.push_back(LoopNest(temps_[t].vars, first_temp + static_cast<int>(t),
                                g_.Flatten(temps_[t].value), fn.buffers));
    }
    stages.push_back(PrefetchNextPoolPlane(
        g_, out_vars, LoopNest(out_vars, fn.num_params - 1, g_.Flatten(value), fn.buffers)));
    fn.body = MakeSeq(std::move(stages));
    out.builder = std::move(g_.builder);
    return out;
  }
 private:
  // The register-tiled schedule (contraction_schedule.h) when it applies.
  // A param's buffer: its compute type, and its element type in memory where
  // that is narrower.
  static BufferDecl ParamBuffer(const Node* p) {
    BufferDecl d{p->name, te::ScalarTypeOf(p->type.dtype), p->type.NumElements()};
    const DType dtype = p->type.dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kInt64 && dtype != DType::kBool &&
        dtype != DType::kFloat64) {
      d.storage = dtype;
    }
    return d;
  }

  bool TryContraction(LoweredGroup& out, const std::vector<Var>& out_vars, const Expr& value) {
    LoopFunction& fn = out.function;
    ContractionTarget target;
    target.builder = &b_;
    target.out_vars = out_vars;
    Expr group_value = value;
    Stmt padding_stage;
    bool padded_by_rows = false;
    const Node* conv = InPlaceConv(g_);
    std::optional<WinogradStages> winograd;
    if (const Node* winograd_conv = WinogradConv(g_)) {
      // Winograd's F(2x2 or 4x4, 3x3) (winograd_conv.cc): the schedule tiles its GEMMs.
      winograd = PrepareWinogradConv(g_, winograd_conv, fn, target);
      if (!winograd) return false;
    } else if (const Node* blocked = BlockedConv(g_)) {
      // Blocked channels (blocked_conv.cc): N is the output's channel blocks.
      target.channel_blocks = true;
      padding_stage = PadBlockedConvInput(g_, blocked, fn, target.out_vars, group_value);
    } else if (conv != nullptr && IsPointwiseWithoutPadding(conv) &&
               g_.member_set.count(conv->inputs[0])) {
      // A fused prologue (fuse_prologue.cc) is applied as its float32
      // activation is read in place (or packed); where there is none (-1),
      // the schedule packs the input, the prologue with it.
      target.conv_input = PrologueInput(conv, fn);
    } else if (conv != nullptr && IsPointwiseWithoutPadding(conv)) {
      // Its input is read as it is: no copy, no padded rows.
      auto param = g_.param_index.find(conv->inputs[0]);
      if (param != g_.param_index.end() && !fn.buffers[param->second].storage) {
        target.conv_input = param->second;
      }
    } else if (conv != nullptr) {
      padding_stage = PadConvInput(g_, conv, fn, target, group_value, padded_by_rows);
    }
    if (!winograd) {
      std::vector<Expr> idx;
      for (const Var& v : target.out_vars) idx.push_back(b_.Ref(v));
      target.out_index = g_.FlatIndex(g_.shapes[fn.num_params - 1], idx);
      target.value = g_.Flatten(group_value);
      target.out_buffer = fn.num_params - 1;
    }
    target.buffers = &fn.buffers;
    target.constant_of = [this, &winograd](int buffer) -> const ConstantData* {
      if (winograd && buffer == winograd->weight_param) return winograd->weights.get();
      if (buffer >= static_cast<int>(g_.params.size())) return nullptr;
      const Node* p = g_.params[buffer];
      return p->is_constant() ? p->value.get() : nullptr;
    };
    // (A Winograd group's record is for its GEMMs: the tuner enumerates
    // plans from the shape this schedule reports, and the group's
    // canonical form names the Winograd op.)
    if (override_) target.schedule_override = &*override_;
    target.knobs = knobs_;
    std::optional<ContractionSchedule> schedule = ScheduleContraction(target);
    if (!schedule) {
      fn.buffers.resize(fn.num_params);  // drop the padded input
      g_.shapes.resize(fn.num_params);
      if (winograd) {
        fn.buffers[winograd->weight_param].num_elements = winograd->weight_elements;
        g_.shapes[winograd->weight_param] = winograd->weight_shape;
      }
      return false;
    }
    fn.body = padding_stage ? MakeSeq({padding_stage, schedule->body}) : schedule->body;
    out.schedule = schedule->summary;
    if (winograd) {
      fn.body = MakeSeq({winograd->input_transform, schedule->body, winograd->output_transform});
      const int m = winograd->tile;
      out.schedule = absl::StrCat("winograd F(", m, "x", m, ",3x3), ", schedule->summary);
      bool packed = false;
      for (const auto& entry : schedule->packed_constants) {
        packed |= entry.first == winograd->weight_param;
      }
      if (!packed)
        schedule->packed_constants.emplace_back(winograd->weight_param, winograd->weights);
    }
    out.contraction = schedule->shape;
    out.tuned = schedule->override_applied;
    out.override_ignored = schedule->override_ignored;
    // The padded copy is made where its reader runs: per channel for
    // depthwise row tiles, per image where images run apart, else up front.
    // (A blocked conv's copy stays up front.)
    std::optional<Stmt> per_channel, per_image;
    const bool nchw_padded = padding_stage && !target.channel_blocks;
    if (nchw_padded && schedule->row_tiles) {
      per_channel = FillPerChannel(g_, conv, fn, target, schedule->body);
    }
    if (nchw_padded && !per_channel) per_image = FillPerImage(g_, conv, fn, target, schedule->body);
    if (per_channel) {
      fn.body = *per_channel;
      out.schedule += " (padded per channel)";
    } else if (per_image) {
      fn.body = *per_image;
      out.schedule += " (padded per image)";
    } else if (padded_by_rows) {
      out.schedule += " (padded by rows)";
    }
    for (auto& [buffer, data] : schedule->packed_constants) {
      // A panel narrowed to integers (its values allow it, contraction_emit.cc)
      // is read by other code than a float32 one of the same structure.
      if (data->type.dtype != DType::kFloat32) {
        absl::StrAppend(&out.canonical, "packed p", buffer, ":", DTypeName(data->type.dtype), ";");
      }
      auto node = std::make_unique<Node>();
      node->kind = NodeKind::kConstant;
      node->name = absl::StrCat(g_.params[buffer]->name, ".packed");
      node->type = data->type;
      node->type_known = true;
      node->value = std::move(data);
      out.params[buffer] = node.get();
      out.packed_params.push_back(std::move(node));
    }
    return true;
  }

  // The float32 parameter of the conv input's shape that the prologue
  // computing `conv`'s input reads, or -1.
  int PrologueInput(const Node* conv, const LoopFunction& fn) const {
    std::vector<const Node*> stack{conv->inputs[0]};
    std::unordered_set<const Node*> seen;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (!g_.member_set.count(n)) {
        auto it = g_.param_index.find(n);
        if (it != g_.param_index.end() && n->type.shape == conv->inputs[0]->type.shape &&
            fn.buffers[it->second].type == te::ScalarType::kF32 &&
            !fn.buffers[it->second].storage) {
          return it->second;
        }
        continue;
      }
      for (const Node* in : n->inputs) stack.push_back(in);
    }
    return -1;
  }

  void CollectParams() {
    for (const Node* m : g_.members) {
      for (const Node* in : m->inputs) {
        if (g_.member_set.count(in) || GroupContext::IsBaked(in) || g_.param_index.count(in)) {
          continue;
        }
        g_.param_index[in] = static_cast<int>(g_.params.size());
        g_.params.push_back(in);
      }
    }
  }

  std::string Canonical() const {
    std::string s;
    std::unordered_map<const Node*, std::string> ref;
    for (size_t i = 0; i < g_.params.size(); ++i) {
      ref[g_.params[i]] = absl::StrCat("p", i);
      absl::StrAppend(&s, "p", i, ":", g_.params[i]->type.ToString(), ";");
    }
    for (size_t i = 0; i < g_.members.size(); ++i) {
      const Node* m = g_.members[i];
      absl::StrAppend(&s, "n", i, "=", m->op->name, "(");
      for (const Node* in : m->inputs) {
        auto it = ref.find(in);
        if (it != ref.end()) {
          absl::StrAppend(&s, it->second, ",");
        } else {  // baked constant: its value is part of the code
          absl::StrAppend(&s, "c:", in->type.ToString(), ":",
                          absl::BytesToHexString(in->value->bytes), ",");
        }
      }
      absl::StrAppend(&s, ")");
      AppendAttrsCanonical(m->attrs, s);
      absl::StrAppend(&s, ":", m->type.ToString(), ";");
      ref[m] = absl::StrCat("n", i);
    }
    return s;
  }

  // Temp loads carry buffer ids -1, -2, ... until the params are counted.
  static int TempPlaceholder(size_t t) { return -1 - static_cast<int>(t); }

  Expr Hoist(const Expr& e, const VarSet& enclosing,
             std::unordered_map<const te::ExprNode*, Expr>& memo) {
    auto it = memo.find(e.get());
    if (it != memo.end()) return it->second;
    Expr result = e;
    if (e->kind == ExprKind::kReduce) {
      VarSet inner = enclosing;
      for (const Var& v : e->reduce_vars) inner.insert(v.get());
      std::unordered_map<const te::ExprNode*, Expr> inner_memo;
      Expr body = Hoist(e->operands[0], inner, inner_memo);
      Expr r = body == e->operands[0] ? e : b_.Rebuild(e, {body});
      const VarSet& free = g_.FreeVars(r);
      if (free.size() < enclosing.size()) {
        auto t = temp_of_.find(r.get());
        size_t index;
        if (t != temp_of_.end()) {
          index = t->second;
        } else {
          HoistedTemp temp;
          for (const te::VarNode* v : free) temp.vars.push_back(VarHandle(v, r));
          std::sort(temp.vars.begin(), temp.vars.end(),
                    [](const Var& a, const Var& b) { return a->id < b->id; });
          temp.value = r;
          index = temps_.size();
          temps_.push_back(std::move(temp));
          temp_of_[r.get()] = index;
        }
        std::vector<Expr> idx;
        for (const Var& v : temps_[index].vars) idx.push_back(b_.Ref(v));
        result = b_.Load(TempPlaceholder(index), r->type, std::move(idx));
      } else {
        result = r;
      }
    } else if (!e->operands.empty()) {
      std::vector<Expr> ops;
      bool changed = false;
      for (const Expr& o : e->operands) {
        ops.push_back(Hoist(o, enclosing, memo));
        changed |= ops.back() != o;
      }
      if (changed) result = b_.Rebuild(e, std::move(ops));
    }
    memo.emplace(e.get(), result);
    return result;
  }

  // The shared_ptr for a VarNode found free in `e` (VarSets hold raw pointers).
  Var VarHandle(const te::VarNode* v, const Expr& e) {
    std::vector<const te::ExprNode*> stack{e.get()};
    std::unordered_set<const te::ExprNode*> seen;
    while (!stack.empty()) {
      const te::ExprNode* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->kind == ExprKind::kVar && n->var.get() == v) return n->var;
      for (const Expr& o : n->operands) stack.push_back(o.get());
    }
    return nullptr;
  }

  static int64_t ReduceWork(const Expr& e, std::unordered_set<const te::ExprNode*>& seen) {
    if (!seen.insert(e.get()).second) return 0;
    int64_t work = 0;
    if (e->kind == ExprKind::kReduce) {
      int64_t n = 1;
      for (const Var& v : e->reduce_vars) n *= v->extent;
      work += n;
    }
    for (const Expr& o : e->operands) work += ReduceWork(o, seen);
    return work;
  }

  Stmt LoopNest(const std::vector<Var>& vars, int buffer, const Expr& value,
                std::vector<BufferDecl>& buffers) {
    std::vector<Var> loops;
    std::vector<int64_t> shape;
    std::vector<Expr> idx;
    for (const Var& v : vars) {
      shape.push_back(v->extent);
      idx.push_back(b_.Ref(v));
      if (v->extent != 1) loops.push_back(v);
    }
    Stmt body = MakeStore(buffer, g_.FlatIndex(shape, idx), value);
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    std::unordered_set<const te::ExprNode*> seen;
    const int64_t work = elements * (1 + ReduceWork(value, seen));
    int innermost = static_cast<int>(loops.size()) - 1;
    if (!loops.empty()) {
      if (Stmt row = RowAccumulated(g_, loops, buffer, g_.FlatIndex(shape, idx), value, buffers)) {
        body = row;
        --innermost;  // x's loops are inside `row`
      }
    }
    for (int d = innermost; d >= 0; --d) {
      ForKind kind = ForKind::kSerial;
      if (d == static_cast<int>(loops.size()) - 1) kind = ForKind::kVectorized;
      if (d == 0 && loops.size() > 1 && work >= kParallelWorkThreshold) kind = ForKind::kParallel;
      body = MakeFor(loops[d], kind, body);
    }
    return body;
  }
  GroupContext g_;
  te::ExprBuilder& b_ = g_.b;
  std::vector<HoistedTemp> temps_;
  std::unordered_map<const te::ExprNode*, size_t> temp_of_;
  std::optional<ScheduleOverride> override_;  // for this group's contraction
  const ContractionKnobs* knobs_;             // null: the host's
};

}  // namespace

LoweredGroup LowerGroup(const std::vector<const Node*>& members, const std::string& name,
                        const ScheduleOverrideLookup& overrides, const ContractionKnobs* knobs) {
  GroupLowerer lowerer(members, knobs);
  return lowerer.Lower(name, overrides);
}

}  // namespace kiln::lower
