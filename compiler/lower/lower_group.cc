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
// 5. Schedule (simple for now): each loop nest's outer loop is parallel when
//    the work is large enough, and its innermost loop is marked vectorized.
//    When the output element holds a reduction that reads memory contiguously
//    (or not at all) along the innermost output dim x — conv2d along the
//    output row, matmul along N — the reduction is turned inside out: a
//    thread-local row of accumulators acc[x] is initialised, then for each
//    reduction step a vectorised x loop updates the whole row, then the
//    epilogue reads acc[x]. The x loop is then long, unit-stride and
//    vectorisable, where the reduction loop itself (a 3-wide kernel window, a
//    channel stride) is not.
//    A group whose value is a single sum of products (dense, matmul, conv2d
//    with their epilogues) gets the packed, register-tiled schedule of
//    contraction_schedule.cc instead of steps 3 and 5.
#include "compiler/lower/lower_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/contraction_schedule.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

// Work (elements times reduction length) above which an outer loop goes parallel.
constexpr int64_t kParallelWorkThreshold = 1 << 15;
// The smallest padded plane (elements per phase) whose copy is split across
// threads by rows rather than channels (see FillPhases). On smaller planes the
// threads' row ranges meet inside cache lines of every channel, and the
// shared lines cost more than the split saves: resnet18's 7x7 convs at 2
// threads took 4-7% longer, its 1x1 stride-2 conv on 14x14 twice as long.
constexpr int64_t kMinRowSplitPlane = 1024;
// The smallest input plane (elements) a depthwise conv or a pool prefetches
// the next of (see PrefetchNextPlane).
constexpr int64_t kMinPrefetchPlane = 2048;
// The largest padded channel FillPerChannel keeps on a thread's stack.
constexpr int64_t kMaxPlaneBytes = 128 << 10;

using VarSet = std::set<const te::VarNode*>;

// Where a fill stores an input channel in the padded buffer: its own image
// and channel, or the start of a buffer that holds less (one channel, one
// image).
struct PaddedPlace {
  te::Expr n, c;
};

class GroupLowerer {
 public:
  explicit GroupLowerer(const std::vector<const Node*>& members) : members_(members) {
    for (const Node* m : members_) member_set_.insert(m);
  }

  LoweredGroup Lower(const std::string& name) {
    LoweredGroup out;
    CollectParams();
    out.params = params_;
    out.canonical = Canonical();
    const Node* root = members_.back();

    std::vector<Var> out_vars;
    std::vector<Expr> out_idx;
    for (size_t d = 0; d < root->type.shape.size(); ++d) {
      out_vars.push_back(b_.NewVar("i" + std::to_string(d), root->type.shape[d]));
      out_idx.push_back(b_.Ref(out_vars.back()));
    }
    Expr value = ValueOf(root, out_idx);

    LoopFunction& fn = out.function;
    fn.name = name;
    for (const Node* p : params_) {
      fn.buffers.push_back({p->name, te::ScalarTypeOf(p->type.dtype), p->type.NumElements()});
      shapes_.push_back(p->type.shape);
    }
    fn.buffers.push_back({root->name, te::ScalarTypeOf(root->type.dtype), root->type.NumElements()});
    shapes_.push_back(root->type.shape);
    fn.num_params = static_cast<int>(fn.buffers.size());

    if (TryContraction(out, out_vars, value)) {
      out.scheduled = true;
      out.builder = std::move(builder_);
      return out;
    }

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
      shapes_.push_back(shape);
    }
    // Temp loads were created with placeholder ids; shift them past the params.
    temp_base_ = first_temp;

    std::vector<Stmt> stages;
    for (size_t t = 0; t < temps_.size(); ++t) {
      stages.push_back(LoopNest(temps_[t].vars, first_temp + static_cast<int>(t),
                                Flatten(temps_[t].value), fn.buffers));
    }
    stages.push_back(PrefetchNextPoolPlane(
        out_vars, LoopNest(out_vars, fn.num_params - 1, Flatten(value), fn.buffers)));
    fn.body = MakeSeq(std::move(stages));
    out.builder = std::move(builder_);
    return out;
  }

 private:
  struct Temp {
    std::vector<Var> vars;
    Expr value;
  };

  // The register-tiled schedule (contraction_schedule.h) when it applies.
  bool TryContraction(LoweredGroup& out, const std::vector<Var>& out_vars, const Expr& value) {
    LoopFunction& fn = out.function;
    ContractionTarget target;
    target.builder = &b_;
    target.out_vars = out_vars;
    Expr group_value = value;
    Stmt padding_stage;
    bool padded_by_rows = false;
    const Node* conv = InPlaceConv();
    if (conv != nullptr && IsPointwiseWithoutPadding(conv)) {
      // Its input is read as it is: no copy, no padded rows.
      auto param = param_index_.find(conv->inputs[0]);
      if (param != param_index_.end()) target.conv_input = param->second;
    } else if (conv != nullptr) {
      padding_stage = PadConvInput(conv, fn, target, group_value, padded_by_rows);
    }
    std::vector<Expr> idx;
    for (const Var& v : target.out_vars) idx.push_back(b_.Ref(v));
    target.out_index = FlatIndex(shapes_[fn.num_params - 1], idx);
    target.value = Flatten(group_value);
    target.out_buffer = fn.num_params - 1;
    target.buffers = &fn.buffers;
    target.constant_of = [this](int buffer) -> const ConstantData* {
      if (buffer >= static_cast<int>(params_.size())) return nullptr;
      const Node* p = params_[buffer];
      return p->is_constant() ? p->value.get() : nullptr;
    };
    std::optional<ContractionSchedule> schedule = ScheduleContraction(target);
    if (!schedule) {
      fn.buffers.resize(fn.num_params);  // drop the padded input
      shapes_.resize(fn.num_params);
      return false;
    }
    fn.body = padding_stage ? MakeSeq({padding_stage, schedule->body}) : schedule->body;
    out.schedule = schedule->summary;
    // The padded copy is made where its reader runs: per channel for
    // depthwise row tiles, per image where images run apart, else up front.
    std::optional<Stmt> per_channel, per_image;
    if (padding_stage && schedule->row_tiles) {
      per_channel = FillPerChannel(conv, fn, target, schedule->body);
    }
    if (padding_stage && !per_channel) per_image = FillPerImage(conv, fn, target, schedule->body);
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
      auto node = std::make_unique<Node>();
      node->kind = NodeKind::kConstant;
      node->name = absl::StrCat(params_[buffer]->name, ".packed");
      node->type = data->type;
      node->type_known = true;
      node->value = std::move(data);
      out.params[buffer] = node.get();
      out.packed_params.push_back(std::move(node));
    }
    return true;
  }

  // The group's conv2d when the contraction schedule can read its input in
  // place after padding (dilation 1, any stride up to 4; grouped and
  // depthwise too) and it is the group's only anchor, producing the root's
  // shape.
  const Node* InPlaceConv() const {
    const Node* conv = nullptr;
    for (const Node* m : members_) {
      if (m->op->name == "conv2d") {
        if (conv != nullptr) return nullptr;
        conv = m;
      } else if (m->op->pattern >= OpPattern::kCommReduce) {
        return nullptr;
      }
    }
    if (conv == nullptr || !std::holds_alternative<Conv2DAttrs>(conv->attrs)) return nullptr;
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t> one{1, 1};
    if (a.dilation != one || a.strides[0] > 4 || a.strides[1] > 4) return nullptr;
    if (conv->type.shape != members_.back()->type.shape) return nullptr;
    return conv;
  }

  // A 1x1 conv without padding. At stride 1 its padded input would be an
  // exact copy of its input. Strided, the copy held every phase, all of the
  // input, for the one phase read; read in place instead, channel lanes
  // broadcast every other pixel and the usual tiling packs them. resnet18's
  // 1x1 stride-2 convs alone, 2 threads: on 28x28 inputs (channel lanes)
  // 0.072-0.074 -> 0.034 ms at batch 1, 0.48-0.50 -> 0.32-0.33 ms at batch 8;
  // on 56x56 inputs (the usual tiling) 0.061-0.064 -> 0.048 ms at batch 1,
  // 0.327 -> 0.36-0.37 ms at batch 8.
  static bool IsPointwiseWithoutPadding(const Node* conv) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
    const auto zero = [](int64_t p) { return p == 0; };
    return ws[2] == 1 && ws[3] == 1 && std::all_of(a.padding.begin(), a.padding.end(), zero);
  }

  // Prepares `conv` for the in-place read (contraction_schedule.cc's design
  // note): a stage copying its input into a zero-padded temporary, and the
  // group's value recomputed over rows as wide as the padded input, with the
  // extra columns masked at the store. Returns the stage; `by_rows` tells
  // how it is split across threads (see FillPhases).
  Stmt PadConvInput(const Node* conv, LoopFunction& fn, ContractionTarget& target, Expr& value,
                    bool& by_rows) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
    const std::vector<int64_t>& os = conv->type.shape;
    const int64_t sy = a.strides[0], sx = a.strides[1];
    const int64_t hp = xs[2] + a.padding[0] + a.padding[2];
    const int64_t wp = xs[3] + a.padding[1] + a.padding[3];
    // Strided: the padded input is stored as sy x sx phases, phase (py, px)
    // holding rows py, py + sy, ... and columns px, px + sx, ...; input row
    // oh * sy + kh is then row oh + kh / sy of phase kh % sy, so a strided
    // conv reads each phase with stride 1, like a stride-1 conv.
    const int64_t hq = (hp + sy - 1) / sy, wq = (wp + sx - 1) / sx;
    const std::vector<int64_t> shape{xs[0], xs[1], sy, sx, hq, wq};
    const int padded = static_cast<int>(fn.buffers.size());
    // Slack: a 64-lane tile overrunning the last row, plus the window.
    fn.buffers.push_back({"padded_input", te::ScalarType::kF32,
                          xs[0] * xs[1] * sy * sx * hq * wq + 64 + ws[3]});
    shapes_.push_back(shape);
    target.conv_input = padded;
    target.conv_input_has_slack = true;

    const bool parallel = xs[0] * xs[1] * hp * wp >= kParallelWorkThreshold;
    by_rows = a.groups == 1 && hq * wq >= kMinRowSplitPlane;
    Stmt fill = FillPhases(conv, padded, shape, parallel, by_rows);

    Var on = b_.NewVar("i0", os[0]), oc = b_.NewVar("i1", os[1]);
    Var oh = b_.NewVar("i2", os[2]), ow = b_.NewVar("i3", wq);
    Var ic = b_.NewVar("rc", ws[1]), kh = b_.NewVar("ry", ws[2]), kw = b_.NewVar("rx", ws[3]);
    Expr weight = ValueOf(conv->inputs[1], {b_.Ref(oc), b_.Ref(ic), b_.Ref(kh), b_.Ref(kw)});
    // Grouped: output channel oc reads input channel (oc / out_per_group) *
    // in_per_group + ic (depthwise: oc itself, so oc becomes a batch dim).
    const int64_t out_per_group = os[1] / a.groups;
    Expr channel = b_.Add(b_.Mul(b_.Div(b_.Ref(oc), b_.Int(out_per_group)), b_.Int(ws[1])),
                          b_.Ref(ic));
    Expr data = b_.Load(padded, te::ScalarType::kF32,
                        {b_.Ref(on), channel, b_.Mod(b_.Ref(kh), b_.Int(sy)),
                         b_.Mod(b_.Ref(kw), b_.Int(sx)),
                         b_.Add(b_.Ref(oh), b_.Div(b_.Ref(kh), b_.Int(sy))),
                         b_.Add(b_.Ref(ow), b_.Div(b_.Ref(kw), b_.Int(sx)))});
    Expr sum = b_.Reduce(te::ReduceOp::kSum, {ic, kh, kw}, b_.Mul(data, weight));
    if (conv->inputs.size() == 3) sum = b_.Add(sum, ValueOf(conv->inputs[2], {b_.Ref(oc)}));
    std::vector<Expr> idx{b_.Ref(on), b_.Ref(oc), b_.Ref(oh), b_.Ref(ow)};
    std::vector<const te::ExprNode*> key;
    for (const Expr& e : idx) key.push_back(e.get());
    memo_[{conv, key}] = sum;
    value = ValueOf(members_.back(), idx);
    target.out_vars = {on, oc, oh, ow};
    if (wq != os[3]) target.store_predicate = b_.Compare(te::CompareOp::kLT, b_.Ref(ow), b_.Int(os[3]));
    return fill;
  }

  // A depthwise conv reads input channel c for output channel c alone, so
  // its padded copy can be made one channel at a time, just before the loop
  // over that channel's output rows, into a plane private to the thread (a
  // `local` buffer) that is still in L2 when the rows read it. The copy of
  // the whole input wrote, and the conv then read back, as many bytes as the
  // conv's input: for mobilenet_v2's depthwise convs that traffic was most of
  // their time (stride 2 on 96 x 112 x 112: 0.41 -> 0.20 ms). Only with row
  // tiles: where one tile spans several rows of a small plane (7 x 7) the
  // fill's loop overhead per channel made the conv slower (0.044 -> 0.069
  // ms). Returns the new body, or nothing when the conv is not
  // depthwise, a plane is too big for a thread's stack, or the schedule reads
  // the padded input outside its loop over output channels.
  std::optional<Stmt> FillPerChannel(const Node* conv, LoopFunction& fn,
                                     const ContractionTarget& target, const Stmt& main) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
    if (a.groups != xs[1] || ws[1] != 1 || conv->type.shape[1] != xs[1]) return std::nullopt;
    const int padded = target.conv_input;
    const std::vector<int64_t>& shape = shapes_[padded];
    const int64_t plane = shape[2] * shape[3] * shape[4] * shape[5];
    const int64_t slack = fn.buffers[padded].num_elements - xs[0] * xs[1] * plane;
    if ((plane + slack) * 4 > kMaxPlaneBytes) return std::nullopt;
    const Var& on = target.out_vars[0];
    const Var& oc = target.out_vars[1];
    auto ref = [&](const Var& v) { return v->extent == 1 ? b_.Int(0) : b_.Ref(v); };

    auto redirect = [&](const Expr& e) { return RedirectLoads(e, padded, {on, oc}); };
    std::function<Stmt(const Stmt&, bool)> rewrite = [&](const Stmt& s, bool in_channel) -> Stmt {
      switch (s->kind) {
        case StmtKind::kStore:
          return MakeStore(s->buffer, redirect(s->index), redirect(s->value),
                           redirect(s->predicate));
        case StmtKind::kSeq: {
          std::vector<Stmt> children;
          for (const Stmt& c : s->children) children.push_back(rewrite(c, in_channel));
          return MakeSeq(std::move(children));
        }
        case StmtKind::kFor:
          if (s->var == oc && !in_channel && StmtLoadsBuffer(s, padded)) {
            Stmt fill = FillChannel(conv, padded, shape, ref(on), ref(oc), {b_.Int(0), b_.Int(0)});
            Stmt body = PrefetchNextPlane(conv, ref(on), ref(oc), rewrite(s->children[0], true));
            return MakeFor(s->var, s->for_kind, MakeSeq({fill, body}));
          }
          return MakeFor(s->var, s->for_kind, rewrite(s->children[0], in_channel));
      }
      return s;
    };
    // The channel loop must read the padded input, and nothing outside it may
    // (that would read a plane that is not there).
    bool outside = false, found = false;
    std::function<void(const Stmt&)> check = [&](const Stmt& s) {
      if (s->kind == StmtKind::kFor && s->var == oc) {
        found |= StmtLoadsBuffer(s, padded);
        return;
      }
      if (s->kind == StmtKind::kStore) outside |= StmtLoadsBuffer(s, padded);
      for (const Stmt& c : s->children) check(c);
    };
    check(main);
    if (outside || !found) return std::nullopt;
    fn.buffers[padded].num_elements = plane + slack;
    fn.buffers[padded].local = true;
    return rewrite(main, false);
  }

  // `e` (or null) with its loads of `padded` moved to a buffer that holds
  // less of it (one channel, one image): `vars` read as 0 in their indices.
  Expr RedirectLoads(const Expr& e, int padded, const std::vector<Var>& vars) {
    if (!e) return e;
    const std::vector<Expr> zeros(vars.size(), b_.Int(0));
    return b_.Rewrite(e, [&](const Expr& x) {
      if (x->kind != ExprKind::kLoad || x->buffer != padded) return x;
      return b_.Rebuild(x, {b_.Substitute(x->operands[0], vars, zeros)});
    });
  }

  // Where the schedule has a loop over a conv's images (channel lanes'
  // ImagesApart; also K blocks, row tiles and the usual tiling at batch > 1),
  // each image's padded input is copied just before its tiles, so they read
  // it from L2 rather than from a copy of every image made up front. With
  // the image loop serial (all threads on one image's tiles) the copy is
  // split by rows, as FillPhases splits it, into a buffer of one image; with
  // it parallel, each thread copies its own images into their places.
  // Returns nothing unless the padded input is read only inside the image
  // loop.
  std::optional<Stmt> FillPerImage(const Node* conv, LoopFunction& fn,
                                   const ContractionTarget& target, const Stmt& main) {
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    if (xs[0] == 1) return std::nullopt;
    const int padded = target.conv_input;
    const Var& on = target.out_vars[0];
    const StmtNode* image_loop = nullptr;
    bool outside = false;
    std::function<void(const Stmt&)> find = [&](const Stmt& s) {
      if (s->kind == StmtKind::kFor && s->var == on) {
        if (image_loop != nullptr) outside = true;
        image_loop = s.get();
        return;
      }
      if (s->kind != StmtKind::kFor && s->kind != StmtKind::kSeq) {
        outside |= StmtLoadsBuffer(s, padded);
      }
      for (const Stmt& c : s->children) find(c);
    };
    find(main);
    if (image_loop == nullptr || outside || !StmtLoadsBuffer(image_loop->children[0], padded)) {
      return std::nullopt;
    }
    const bool shared = image_loop->for_kind == ForKind::kSerial;
    const std::vector<int64_t>& shape = shapes_[padded];
    const int64_t image = shape[1] * shape[2] * shape[3] * shape[4] * shape[5];
    // Shared: split by rows, as FillPhases splits it. Per thread: channel by
    // channel, rows split at compile time (a split by rows with a select per
    // element made the 7x7 and 14x14 depthwise convs of mobilenet_v2 2-3x
    // slower).
    Stmt fill;
    if (shared) {
      Var yq = b_.NewVar("yq", shape[4]);
      const bool parallel = image >= kParallelWorkThreshold;
      fill = MakeFor(yq, parallel ? ForKind::kParallel : ForKind::kSerial,
                     FillRowOfChannels(conv, padded, shape, b_.Ref(on), b_.Int(0), b_.Ref(yq)));
    } else {
      fill = FillChannels(conv, padded, shape, b_.Ref(on), b_.Ref(on), ForKind::kSerial);
    }

    Stmt body = image_loop->children[0];
    if (shared) {
      const int64_t slack = fn.buffers[padded].num_elements - xs[0] * image;
      fn.buffers[padded].num_elements = image + slack;
      body = MapExprs(body, [&](const Expr& e) { return RedirectLoads(e, padded, {on}); });
    }
    std::function<Stmt(const Stmt&)> rewrite = [&](const Stmt& s) -> Stmt {
      if (s.get() == image_loop) return MakeFor(s->var, s->for_kind, MakeSeq({fill, body}));
      if (s->kind == StmtKind::kSeq) {
        std::vector<Stmt> children;
        for (const Stmt& c : s->children) children.push_back(rewrite(c));
        return MakeSeq(std::move(children));
      }
      if (s->kind == StmtKind::kFor) return MakeFor(s->var, s->for_kind, rewrite(s->children[0]));
      return s;
    };
    return rewrite(main);
  }

  // `rows`, a depthwise conv's (or a pool's) loop over the output rows of
  // channel `c` of image `n`, with prefetches spread over its iterations for
  // the input plane the thread reads next (channel c + 1, or the next
  // image's first). A depthwise conv's fill reads a plane at a time and then
  // computes from L1, so without them memory sits idle while the rows run
  // and the next fill waits on it (mobilenet_v2 b8, 1 thread: the stride-2
  // conv on 112 x 112 planes went from 3.9-4.0 to 2.9-3.7 ms, on 56 x 56
  // from 0.84 to 0.72). Only where the input is a parameter, read as it is,
  // and its planes are large: planes of 28 x 28 and less came from L2 anyway
  // and ran up to 15% slower.
  Stmt PrefetchNextPlane(const Node* op, const Expr& n, const Expr& c, const Stmt& rows) {
    const std::vector<int64_t>& xs = op->inputs[0]->type.shape;
    const int64_t plane = xs[2] * xs[3];
    auto param = param_index_.find(op->inputs[0]);
    if (param == param_index_.end() || rows->kind != StmtKind::kFor || rows->var->extent < 2 ||
        plane < kMinPrefetchPlane) {
      return rows;
    }
    constexpr int64_t kLineFloats = 16;
    const int64_t lines = (plane + kLineFloats - 1) / kLineFloats;
    const int64_t per_row = (lines + rows->var->extent - 1) / rows->var->extent;
    Var line = b_.NewVar("line", per_row);
    Expr next = b_.Add(b_.Add(b_.Mul(n, b_.Int(xs[1])), c), b_.Int(1));
    Expr offset = b_.Mul(b_.Add(b_.Mul(b_.Ref(rows->var), b_.Int(per_row)), b_.Ref(line)),
                         b_.Int(kLineFloats));
    Stmt prefetch =
        MakeFor(line, ForKind::kSerial,
                MakePrefetch(param->second, b_.Add(b_.Mul(next, b_.Int(plane)), offset)));
    return MakeFor(rows->var, rows->for_kind, MakeSeq({prefetch, rows->children[0]}));
  }

  // `nest` (the output's loop nest) with the rows of each output plane
  // prefetching the next input plane, when the group is one pooling op over
  // a parameter with planes of at least kMinPrefetchPlane elements. A pool
  // reads each input plane once, in order, a few short rows at a time, and
  // so waits on memory the way depthwise convs did (see PrefetchNextPlane).
  // resnet18's 3x3 stride-2 pool at batch 8: alone at 1 thread, 2.35-2.50
  // -> 1.74-1.94 ms; in the model at 2 threads, 2.18-2.31 -> 1.36-1.39 ms.
  Stmt PrefetchNextPoolPlane(const std::vector<Var>& out_vars, const Stmt& nest) {
    const Node* pool = members_.back();
    if (pool->op->name != "max_pool2d" && pool->op->name != "avg_pool2d") return nest;
    if (out_vars.size() != 4 || out_vars[1]->extent < 2) return nest;
    // The loops over image and channel, down to the loop over output rows.
    std::function<Stmt(const Stmt&)> rewrite = [&](const Stmt& s) -> Stmt {
      if (s->kind != StmtKind::kFor) return s;
      if (s->var == out_vars[2]) {
        return PrefetchNextPlane(pool, b_.Ref(out_vars[0]), b_.Ref(out_vars[1]), s);
      }
      if (s->var != out_vars[0] && s->var != out_vars[1]) return s;
      return MakeFor(s->var, s->for_kind, rewrite(s->children[0]));
    };
    return rewrite(nest);
  }

  // The conv's input copied into its (phase-split) padded buffer, in
  // parallel by padded rows (images and rows together at batch > 1) when
  // `by_rows`, else by channels. An ungrouped conv's tiles are split across
  // threads by output pixels, and so was the kernel that wrote its input;
  // split by rows, each thread copies rows its own core wrote and then reads,
  // mostly, rows it copied. Split by channels, about half of both reads
  // crossed cores (four chained 64-channel 56x56 3x3 convs at 2 threads:
  // 2.86-2.99 ms against 2.49-2.60). Grouped and depthwise convs run their
  // groups in parallel instead, and small planes share cache lines between
  // the threads' rows, so they keep the split by channels.
  Stmt FillPhases(const Node* conv, int padded, const std::vector<int64_t>& shape, bool parallel,
                  bool by_rows) {
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const ForKind kind = parallel ? ForKind::kParallel : ForKind::kSerial;
    if (!by_rows) {
      Var pn = b_.NewVar("n", xs[0]);
      Stmt fill = FillChannels(conv, padded, shape, b_.Ref(pn), b_.Ref(pn), kind);
      if (xs[0] != 1) fill = MakeFor(pn, ForKind::kSerial, fill);
      return fill;
    }
    const int64_t hq = shape[4];
    Var rows = b_.NewVar("nyq", xs[0] * hq);
    Expr n = xs[0] == 1 ? b_.Int(0) : b_.Div(b_.Ref(rows), b_.Int(hq));
    Expr yq = xs[0] == 1 ? b_.Ref(rows) : b_.Mod(b_.Ref(rows), b_.Int(hq));
    return MakeFor(rows, kind, FillRowOfChannels(conv, padded, shape, n, n, yq));
  }

  // Every channel of image `n`, channel by channel (a loop of `kind`), into
  // image `dst_n` of the padded buffer.
  Stmt FillChannels(const Node* conv, int padded, const std::vector<int64_t>& shape, const Expr& n,
                    const Expr& dst_n, ForKind kind) {
    Var c = b_.NewVar("c", conv->inputs[0]->type.shape[1]);
    return MakeFor(c, kind, FillChannel(conv, padded, shape, n, b_.Ref(c), {dst_n, b_.Ref(c)}));
  }

  // Padded row `yq` (every phase row) of each channel of image `n`, into
  // image `dst_n` of the padded buffer; the row may be padding.
  Stmt FillRowOfChannels(const Node* conv, int padded, const std::vector<int64_t>& shape,
                         const Expr& n, const Expr& dst_n, const Expr& yq) {
    Var c = b_.NewVar("c", conv->inputs[0]->type.shape[1]);
    std::vector<Stmt> phases;
    for (int64_t py = 0; py < shape[2]; ++py) {
      phases.push_back(FillRow(conv, padded, shape, n, b_.Ref(c), {dst_n, b_.Ref(c)}, py, yq,
                               /*row_known_inside=*/false));
    }
    return MakeFor(c, ForKind::kSerial, MakeSeq(std::move(phases)));
  }

  // [lo, hi): the run of indices in [0, n) where `inside` holds (it holds on
  // one contiguous run, possibly empty, which then starts at n).
  static std::pair<int64_t, int64_t> InsideRun(int64_t n,
                                               const std::function<bool(int64_t)>& inside) {
    int64_t lo = 0;
    while (lo < n && !inside(lo)) ++lo;
    int64_t hi = lo;
    while (hi < n && inside(hi)) ++hi;
    return {lo, hi};
  }

  // The phases of input channel `c` of image `n`, stored at `place` in the
  // padded buffer. Rows are split at compile time into the ranges
  // that lie wholly inside the input, copied by FillRow, and the padding
  // rows, written with zeros.
  Stmt FillChannel(const Node* conv, int padded, const std::vector<int64_t>& shape, const Expr& n,
                   const Expr& c, const PaddedPlace& place) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const int64_t sy = shape[2], sx = shape[3], hq = shape[4], wq = shape[5];
    const int64_t pt = a.padding[0];
    std::vector<Stmt> rows;
    for (int64_t py = 0; py < sy; ++py) {
      auto [ylo, yhi] = InsideRun(hq, [&](int64_t yq) {
        const int64_t y = yq * sy + py - pt;
        return y >= 0 && y < xs[2];
      });
      // Rows wholly outside the input: zeros.
      for (auto [from, to] : {std::pair<int64_t, int64_t>{0, ylo}, {yhi, hq}}) {
        if (to <= from) continue;
        Var t = b_.NewVar("yq", to - from), px = b_.NewVar("px", sx), xq = b_.NewVar("xq", wq);
        Stmt zero = MakeStore(
            padded,
            PaddedIndex(shape, place, py, b_.Ref(px), b_.Add(b_.Ref(t), b_.Int(from)), b_.Ref(xq)),
            b_.Float(0));
        rows.push_back(MakeFor(t, ForKind::kSerial,
                               MakeFor(px, ForKind::kSerial,
                                       MakeFor(xq, ForKind::kVectorized, zero))));
      }
      if (yhi <= ylo) continue;
      Var t = b_.NewVar("yq", yhi - ylo);
      rows.push_back(MakeFor(t, ForKind::kSerial,
                             FillRow(conv, padded, shape, n, c, place, py,
                                     b_.Add(b_.Ref(t), b_.Int(ylo)), /*row_known_inside=*/true)));
    }
    return MakeSeq(std::move(rows));
  }

  // Element (place.n, place.c, py, px, yq, xq) of the padded buffer.
  Expr PaddedIndex(const std::vector<int64_t>& shape, const PaddedPlace& place, int64_t py,
                   const Expr& px, const Expr& yq, const Expr& xq) {
    return FlatIndex(shape, {place.n, place.c, b_.Int(py), px, yq, xq});
  }

  // Row `yq` of phase row `py` of channel `c` of image `n`, stored at `place`
  // in the padded buffer: columns split at compile time
  // into the range wholly inside the input, where the sx phases of a column
  // are written by one iteration (px unrolled, so the vectoriser turns the sx
  // strided reads into wide loads and shuffles instead of gathers; stride 1:
  // a plain row copy), and the thin borders, a select per element. Unless
  // `row_known_inside`, the row may be padding, and every element selects
  // zero there (reading a clamped row meanwhile). Only the padding is written
  // with zeros; the slack after the last row is read only by masked lanes.
  Stmt FillRow(const Node* conv, int padded, const std::vector<int64_t>& shape, const Expr& n,
               const Expr& c, const PaddedPlace& place, int64_t py, const Expr& yq,
               bool row_known_inside) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const int64_t sy = shape[2], sx = shape[3], wq = shape[5];
    const int64_t pt = a.padding[0], pl = a.padding[1];
    auto column_inside = [&](int64_t xq) {  // for every phase px
      return xq * sx - pl >= 0 && xq * sx + sx - 1 - pl < xs[3];
    };
    auto [xlo, xhi] = InsideRun(wq, column_inside);
    Expr y = b_.Sub(b_.Add(b_.Mul(yq, b_.Int(sy)), b_.Int(py)), b_.Int(pt));
    Expr row_inside;
    if (!row_known_inside) {
      row_inside = b_.InRange(y, xs[2]);
      y = b_.ClampIndex(y, xs[2]);
    }
    auto input = [&](const Expr& x) { return Flatten(ValueOf(conv->inputs[0], {n, c, y, x})); };
    auto guarded = [&](Expr inside, const Expr& value) {
      if (row_inside) {
        inside = inside ? b_.Binary(te::BinaryOp::kAnd, row_inside, inside) : row_inside;
      }
      return inside ? b_.Select(inside, value, b_.Float(0)) : value;
    };
    std::vector<Stmt> columns;
    if (xhi > xlo) {
      Var u = b_.NewVar("xq", xhi - xlo), px = b_.NewVar("px", sx);
      Expr xq = b_.Add(b_.Ref(u), b_.Int(xlo));
      Expr x = b_.Sub(b_.Add(b_.Mul(xq, b_.Int(sx)), b_.Ref(px)), b_.Int(pl));
      Stmt copy = MakeStore(padded, PaddedIndex(shape, place, py, b_.Ref(px), yq, xq),
                            guarded(nullptr, input(x)));
      columns.push_back(MakeFor(u, ForKind::kVectorized, MakeFor(px, ForKind::kUnrolled, copy)));
    }
    // Border columns (all of them when no column is wholly inside).
    std::vector<std::pair<int64_t, int64_t>> borders = {{0, xlo}, {xhi, wq}};
    if (xhi <= xlo) borders = {{0, wq}};
    for (auto [from, to] : borders) {
      if (to <= from) continue;
      Var u = b_.NewVar("xq", to - from), px = b_.NewVar("px", sx);
      Expr xq = b_.Add(b_.Ref(u), b_.Int(from));
      Expr x = b_.Sub(b_.Add(b_.Mul(xq, b_.Int(sx)), b_.Ref(px)), b_.Int(pl));
      Stmt store = MakeStore(padded, PaddedIndex(shape, place, py, b_.Ref(px), yq, xq),
                             guarded(b_.InRange(x, xs[3]), input(b_.ClampIndex(x, xs[3]))));
      columns.push_back(MakeFor(px, ForKind::kSerial, MakeFor(u, ForKind::kSerial, store)));
    }
    return MakeSeq(std::move(columns));
  }

  void CollectParams() {
    for (const Node* m : members_) {
      for (const Node* in : m->inputs) {
        if (member_set_.count(in) || IsBaked(in) || param_index_.count(in)) continue;
        param_index_[in] = static_cast<int>(params_.size());
        params_.push_back(in);
      }
    }
  }

  static bool IsBaked(const Node* n) {
    return n->is_constant() && n->type.NumElements() == 1;
  }

  std::string Canonical() const {
    std::string s;
    std::unordered_map<const Node*, std::string> ref;
    for (size_t i = 0; i < params_.size(); ++i) {
      ref[params_[i]] = absl::StrCat("p", i);
      absl::StrAppend(&s, "p", i, ":", params_[i]->type.ToString(), ";");
    }
    for (size_t i = 0; i < members_.size(); ++i) {
      const Node* m = members_[i];
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

  Expr BakedValue(const Node* n) {
    switch (n->type.dtype) {
      case DType::kFloat32:
        return b_.Float(*n->value->data<float>());
      case DType::kInt64:
        return b_.Int(*n->value->data<int64_t>());
      case DType::kBool:
        return b_.Bool(*n->value->data<uint8_t>() != 0);
    }
    return b_.Float(0);
  }

  Expr ValueOf(const Node* n, const std::vector<Expr>& idx) {
    if (!member_set_.count(n)) {
      if (IsBaked(n)) return BakedValue(n);
      return b_.Load(param_index_.at(n), te::ScalarTypeOf(n->type.dtype), idx);
    }
    std::vector<const te::ExprNode*> key_idx;
    for (const Expr& e : idx) key_idx.push_back(e.get());
    auto key = std::make_pair(n, key_idx);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::vector<TensorType> in_types;
    std::vector<te::Accessor> accessors;
    for (const Node* in : n->inputs) {
      in_types.push_back(in->type);
      accessors.push_back([this, in](const std::vector<Expr>& i) { return ValueOf(in, i); });
    }
    te::ComputeContext ctx(b_, n->attrs, in_types, n->type, std::move(accessors), idx);
    Expr e = n->op->compute(ctx);
    memo_.emplace(std::move(key), e);
    return e;
  }

  const VarSet& FreeVars(const Expr& e) {
    auto it = free_.find(e.get());
    if (it != free_.end()) return it->second;
    VarSet vars;
    if (e->kind == ExprKind::kVar) {
      vars.insert(e->var.get());
    } else {
      for (const Expr& o : e->operands) {
        const VarSet& sub = FreeVars(o);
        vars.insert(sub.begin(), sub.end());
      }
      for (const Var& v : e->reduce_vars) vars.erase(v.get());
    }
    return free_.emplace(e.get(), std::move(vars)).first->second;
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
      const VarSet& free = FreeVars(r);
      if (free.size() < enclosing.size()) {
        auto t = temp_of_.find(r.get());
        size_t index;
        if (t != temp_of_.end()) {
          index = t->second;
        } else {
          Temp temp;
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

  int BufferId(int id) const { return id < 0 ? temp_base_ + (-1 - id) : id; }

  Expr FlatIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& idx) {
    Expr flat = b_.Int(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      flat = b_.Add(b_.Mul(flat, b_.Int(shape[d])), idx[d]);
    }
    return flat;
  }

  Expr Flatten(const Expr& root) {
    std::unordered_map<const te::ExprNode*, Expr> memo;
    std::function<Expr(const Expr&)> visit = [&](const Expr& e) -> Expr {
      auto it = memo.find(e.get());
      if (it != memo.end()) return it->second;
      Expr result = e;
      if (!e->operands.empty()) {
        std::vector<Expr> ops;
        for (const Expr& o : e->operands) ops.push_back(visit(o));
        if (e->kind == ExprKind::kLoad) {
          const int id = BufferId(e->buffer);
          result = b_.Load(id, e->type, {FlatIndex(shapes_[id], ops)});
        } else {
          result = b_.Rebuild(e, std::move(ops));
        }
      } else if (e->kind == ExprKind::kLoad) {  // a rank-0 buffer
        result = b_.Load(BufferId(e->buffer), e->type, {b_.Int(0)});
      }
      memo.emplace(e.get(), result);
      return result;
    };
    return visit(root);
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

  // The one reduction in `value` (outside other reductions' bodies) that
  // depends on `x`, when there is exactly one and it nests no reduction.
  Expr RowReduction(const Expr& value, const te::VarNode* x) {
    std::vector<Expr> found;
    std::unordered_set<const te::ExprNode*> seen;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!seen.insert(e.get()).second) return;
      if (e->kind == ExprKind::kReduce) {
        if (FreeVars(e).count(x)) found.push_back(e);
        return;
      }
      for (const Expr& o : e->operands) visit(o);
    };
    visit(value);
    if (found.size() != 1) return nullptr;
    std::unordered_set<const te::ExprNode*> inner;
    bool nested = false;
    std::function<void(const Expr&)> check = [&](const Expr& e) {
      if (!inner.insert(e.get()).second) return;
      nested |= e->kind == ExprKind::kReduce;
      for (const Expr& o : e->operands) check(o);
    };
    check(found[0]->operands[0]);
    return nested ? nullptr : found[0];
  }

  // The largest step of a load index in `body` as `x` goes from `at` to
  // `at` + 1 with the other `vars` at 0, or nullopt when some index does not
  // fold to a constant there.
  std::optional<int64_t> LoadStep(const Expr& body, const Var& x, const std::vector<Var>& vars,
                                  int64_t at) {
    std::vector<Expr> here(vars.size(), b_.Int(0)), next = here;
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i] == x) {
        here[i] = b_.Int(at);
        next[i] = b_.Int(at + 1);
      }
    }
    std::unordered_set<const te::ExprNode*> seen;
    std::optional<int64_t> step = 0;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!step || !seen.insert(e.get()).second) return;
      if (e->kind == ExprKind::kLoad) {
        Expr a = b_.Substitute(e->operands[0], vars, here);
        Expr b = b_.Substitute(e->operands[0], vars, next);
        if (a->kind != ExprKind::kIntImm || b->kind != ExprKind::kIntImm) {
          step.reset();
          return;
        }
        step = std::max(*step, std::abs(b->int_value - a->int_value));
      }
      for (const Expr& o : e->operands) visit(o);
    };
    visit(body);
    return step;
  }


  // The inside-out reduction (see the design note) for innermost loop `x`, or
  // null when it does not apply.
  Stmt RowAccumulated(const std::vector<Var>& loops, int buffer, const Expr& store_index,
                      const Expr& value, std::vector<BufferDecl>& buffers) {
    constexpr int64_t kMaxRow = 4096;
    const Var& x = loops.back();
    if (x->extent < 4 || x->extent > kMaxRow) return nullptr;
    Expr r = RowReduction(value, x.get());
    if (r == nullptr) return nullptr;
    std::vector<Var> vars = loops;
    vars.insert(vars.end(), r->reduce_vars.begin(), r->reduce_vars.end());
    // Loads that step by one or two elements along x (a stride-2 pool too).
    const std::optional<int64_t> step = LoadStep(r->operands[0], x, vars, 0);
    if (!step || *step > 2) return nullptr;
    const Expr body = r->operands[0];
    // A strided row (a stride-2 pool) with a short innermost window: that
    // window is unrolled inside the vector loop, so the loads of one
    // iteration cover every phase of the stride and LLVM's vectoriser can
    // load them as wide interleaved groups instead of one gather per load
    // (resnet18's 3x3 stride-2 max pool: 0.90 -> 0.35 ms, 55 gathers -> 7).
    // (The step is taken at x = 2, clear of the clamps a padded window puts
    // at 0.)
    std::vector<Var> serial = r->reduce_vars;
    const bool strided_window =
        !serial.empty() && serial.back()->extent <= 4 && LoadStep(body, x, vars, 2).value_or(0) > 1;
    // A whole window of at most 16 elements is unrolled and the row computed
    // in one pass, with no row of accumulators to initialise, update once
    // per window row and copy out (resnet18's pool: 0.32 -> 0.20-0.27 ms,
    // with BlockStridedVectorLoops).
    int64_t window_size = 1;
    for (const Var& v : serial) window_size *= v->extent;
    if (strided_window && window_size <= 16) {
      return MakeFor(
          x, ForKind::kVectorized,
          MakeStore(buffer, store_index,
                    b_.Replace(value, r, CombineAll(r->reduce_op(), UnrollWindow(body, serial)))));
    }
    const int acc = static_cast<int>(buffers.size());
    buffers.push_back({absl::StrCat("acc", acc), r->type, x->extent, /*local=*/true});
    Expr slot = b_.Load(acc, r->type, {b_.Ref(x)});
    Expr combined = Combine(r->reduce_op(), slot, body);
    Expr init;
    switch (r->reduce_op()) {
      case te::ReduceOp::kSum:
        init = b_.Constant(r->type, 0);
        break;
      case te::ReduceOp::kProd:
        init = b_.Constant(r->type, 1);
        break;
      case te::ReduceOp::kMax:
        init = r->type == te::ScalarType::kF32 ? b_.Float(-INFINITY)
                                               : b_.Int(std::numeric_limits<int64_t>::min());
        break;
      case te::ReduceOp::kMin:
        init = r->type == te::ScalarType::kF32 ? b_.Float(INFINITY)
                                               : b_.Int(std::numeric_limits<int64_t>::max());
        break;
    }
    if (strided_window) {
      const Var window = serial.back();
      serial.pop_back();
      std::vector<Expr> terms = UnrollWindow(body, {window});
      terms.insert(terms.begin(), slot);
      combined = CombineAll(r->reduce_op(), terms);
    }
    Stmt update = MakeFor(x, ForKind::kVectorized, MakeStore(acc, b_.Ref(x), combined));
    for (auto it = serial.rbegin(); it != serial.rend(); ++it) {
      update = MakeFor(*it, ForKind::kSerial, update);
    }
    return MakeSeq({MakeFor(x, ForKind::kVectorized, MakeStore(acc, b_.Ref(x), init)), update,
                    MakeFor(x, ForKind::kVectorized,
                            MakeStore(buffer, store_index, b_.Replace(value, r, slot)))});
  }

  // `body` at every point of the window `vars`, each bound to a constant.
  std::vector<Expr> UnrollWindow(const Expr& body, const std::vector<Var>& vars) {
    std::vector<Expr> terms{body};
    for (const Var& v : vars) {
      std::vector<Expr> next;
      for (const Expr& t : terms) {
        for (int64_t j = 0; j < v->extent; ++j) next.push_back(b_.Substitute(t, {v}, {b_.Int(j)}));
      }
      terms = std::move(next);
    }
    return terms;
  }

  // terms[0] combined with each of the others in turn.
  Expr CombineAll(te::ReduceOp op, const std::vector<Expr>& terms) {
    Expr combined = terms[0];
    for (size_t j = 1; j < terms.size(); ++j) combined = Combine(op, combined, terms[j]);
    return combined;
  }

  Expr Combine(te::ReduceOp op, const Expr& a, const Expr& b) {
    switch (op) {
      case te::ReduceOp::kSum:
        return b_.Add(a, b);
      case te::ReduceOp::kProd:
        return b_.Mul(a, b);
      case te::ReduceOp::kMax:
        return b_.Max(a, b);
      case te::ReduceOp::kMin:
        return b_.Min(a, b);
    }
    return a;
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
    Stmt body = MakeStore(buffer, FlatIndex(shape, idx), value);
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    std::unordered_set<const te::ExprNode*> seen;
    const int64_t work = elements * (1 + ReduceWork(value, seen));
    int innermost = static_cast<int>(loops.size()) - 1;
    if (!loops.empty()) {
      if (Stmt row = RowAccumulated(loops, buffer, FlatIndex(shape, idx), value, buffers)) {
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

  const std::vector<const Node*>& members_;
  std::unordered_set<const Node*> member_set_;
  std::vector<const Node*> params_;
  std::unordered_map<const Node*, int> param_index_;
  // Handed to the LoweredGroup with the function (the loop passes build on it).
  std::unique_ptr<te::ExprBuilder> builder_ = std::make_unique<te::ExprBuilder>();
  te::ExprBuilder& b_ = *builder_;
  std::map<std::pair<const Node*, std::vector<const te::ExprNode*>>, Expr> memo_;
  std::unordered_map<const te::ExprNode*, VarSet> free_;
  std::vector<Temp> temps_;
  std::unordered_map<const te::ExprNode*, size_t> temp_of_;
  std::vector<std::vector<int64_t>> shapes_;
  int temp_base_ = 0;
};

}  // namespace

LoweredGroup LowerGroup(const std::vector<const Node*>& members, const std::string& name) {
  GroupLowerer lowerer(members);
  return lowerer.Lower(name);
}

}  // namespace kiln::lower
