// Padding a conv's input for the contraction schedule's in-place read
// (contraction_schedule.cc's design note): the input is copied into a
// zero-padded, phase-split temporary that the micro-kernel reads with unit
// stride, and the copy is placed where its reader runs: up front (split by
// rows or by channels), per image just before that image's tiles, or per
// channel into a thread-private plane for depthwise convs with row tiles.
//
// Where an ungrouped conv reads a float32 parameter as it is, each copy is a
// call of the runtime's precompiled kiln_pad_planes (common/kernel_abi.h)
// rather than generated loops: those loops, split at compile time into
// inside and border ranges per phase, were about a fifth of resnet18's
// codegen time (LLVM's loop strength reduction and instruction selection on
// them), for a copy of short rows that precompiled loops do as fast. A fused
// producer (a relu or a cast computed on the way in) keeps the generated
// copy, and so do grouped convs (see FindPlainInput).
#include "compiler/lower/conv_padding.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <variant>

#include "common/int_math.h"
#include "common/kernel_abi.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/plane_prefetch.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::Var;

// The smallest padded plane (elements per phase) whose copy is split across
// threads by rows rather than channels (see FillPhases). On smaller planes the
// threads' row ranges meet inside cache lines of every channel, and the
// shared lines cost more than the split saves: resnet18's 7x7 convs at 2
// threads took 4-7% longer, its 1x1 stride-2 conv on 14x14 twice as long.
constexpr int64_t kMinRowSplitPlane = 1024;
// The shortest input row whose copy calls kiln_pad_planes (see
// FindPlainInput); shorter ones keep the generated, specialised copy.
constexpr int64_t kMinCalledRow = 28;
// The largest padded channel FillPerChannel keeps on a thread's stack.
constexpr int64_t kMaxPlaneBytes = 128 << 10;

// Where a fill stores an input channel in the padded buffer: its own image
// and channel, or the start of a buffer that holds less (one channel, one
// image).
struct PaddedPlace {
  te::Expr n, c;
};

class ConvPadder {
 public:
  explicit ConvPadder(GroupContext& g) : g_(g), b_(g.b) {}

  // Prepares `conv` for the in-place read (contraction_schedule.cc's design
  // note): a stage copying its input into a zero-padded temporary, and the
  // group's value recomputed over rows as wide as the padded input, with the
  // extra columns masked at the store. Returns the stage; `by_rows` tells
  // how it is split across threads (see FillPhases).
  Stmt PadConvInput(const Node* conv, LoopFunction& fn, ContractionTarget& target, Expr& value,
                    bool& by_rows) {
    FindPlainInput(conv, fn);
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
    const int64_t hq = CeilDiv(hp, sy), wq = CeilDiv(wp, sx);
    const std::vector<int64_t> shape{xs[0], xs[1], sy, sx, hq, wq};
    const int padded = static_cast<int>(fn.buffers.size());
    // Slack: a 64-lane tile overrunning the last row, plus the window.
    fn.buffers.push_back({"padded_input", te::ScalarType::kF32,
                          xs[0] * xs[1] * sy * sx * hq * wq + 64 + ws[3]});
    g_.shapes.push_back(shape);
    target.conv_input = padded;
    target.conv_input_has_slack = true;

    const bool parallel = xs[0] * xs[1] * hp * wp >= kParallelWorkThreshold;
    by_rows = a.groups == 1 && hq * wq >= kMinRowSplitPlane;
    Stmt fill = FillPhases(conv, padded, shape, parallel, by_rows);

    Var on = b_.NewVar("i0", os[0]), oc = b_.NewVar("i1", os[1]);
    Var oh = b_.NewVar("i2", os[2]), ow = b_.NewVar("i3", wq);
    Var ic = b_.NewVar("rc", ws[1]), kh = b_.NewVar("ry", ws[2]), kw = b_.NewVar("rx", ws[3]);
    Expr weight = g_.ValueOf(conv->inputs[1], {b_.Ref(oc), b_.Ref(ic), b_.Ref(kh), b_.Ref(kw)});
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
    if (conv->inputs.size() == 3) sum = b_.Add(sum, g_.ValueOf(conv->inputs[2], {b_.Ref(oc)}));
    std::vector<Expr> idx{b_.Ref(on), b_.Ref(oc), b_.Ref(oh), b_.Ref(ow)};
    std::vector<const te::ExprNode*> key;
    for (const Expr& e : idx) key.push_back(e.get());
    g_.memo[{conv, key}] = sum;
    value = g_.ValueOf(g_.members.back(), idx);
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
    FindPlainInput(conv, fn);
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
    if (a.groups != xs[1] || ws[1] != 1 || conv->type.shape[1] != xs[1]) return std::nullopt;
    const int padded = target.conv_input;
    const std::vector<int64_t>& shape = g_.shapes[padded];
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
            Stmt body = PrefetchNextPlane(g_, conv, ref(on), ref(oc), rewrite(s->children[0], true));
            return MakeFor(s->var, s->for_kind, MakeSeq({fill, body}));
          }
          return MakeFor(s->var, s->for_kind, rewrite(s->children[0], in_channel));
        case StmtKind::kPrefetch:  // the schedule's own, of other buffers
        case StmtKind::kCall:      // only fills make calls, and none is here yet
          return s;
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
    FindPlainInput(conv, fn);
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
    const std::vector<int64_t>& shape = g_.shapes[padded];
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
    if (plain_input_ >= 0 && kind == ForKind::kSerial) {
      return PadCall(conv, padded, shape, n, b_.Int(0), {dst_n, b_.Int(0)},
                     conv->inputs[0]->type.shape[1], b_.Int(0), b_.Int(shape[4]));
    }
    Var c = b_.NewVar("c", conv->inputs[0]->type.shape[1]);
    return MakeFor(c, kind, FillChannel(conv, padded, shape, n, b_.Ref(c), {dst_n, b_.Ref(c)}));
  }

  // Padded row `yq` (every phase row) of each channel of image `n`, into
  // image `dst_n` of the padded buffer; the row may be padding.
  Stmt FillRowOfChannels(const Node* conv, int padded, const std::vector<int64_t>& shape,
                         const Expr& n, const Expr& dst_n, const Expr& yq) {
    if (plain_input_ >= 0) {
      return PadCall(conv, padded, shape, n, b_.Int(0), {dst_n, b_.Int(0)},
                     conv->inputs[0]->type.shape[1], yq, b_.Add(yq, b_.Int(1)));
    }
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
    if (plain_input_ >= 0) {
      return PadCall(conv, padded, shape, n, c, place, 1, b_.Int(0), b_.Int(shape[4]));
    }
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
    return g_.FlatIndex(shape, {place.n, place.c, b_.Int(py), px, yq, xq});
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
    auto input = [&](const Expr& x) { return g_.Flatten(g_.ValueOf(conv->inputs[0], {n, c, y, x})); };
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

  // Sets plain_input_: the conv's input buffer when kiln_pad_planes can copy
  // it (a float32 parameter of the group, stored as float32, read as it is)
  // and the conv is ungrouped with rows of at least kMinCalledRow, else -1.
  // Grouped and depthwise convs copy a small plane per group (mobilenet_v2's
  // 7x7 to 28x28), where the call's fixed cost made them 1.3-1.8x slower
  // than the generated, fully specialised copy; so did short rows, less
  // (resnet18's 14x14 and 7x7 convs 6-9%).
  void FindPlainInput(const Node* conv, const LoopFunction& fn) {
    plain_input_ = -1;
    if (std::get<Conv2DAttrs>(conv->attrs).groups != 1) return;
    if (conv->inputs[0]->type.shape[3] < kMinCalledRow) return;
    auto it = g_.param_index.find(conv->inputs[0]);
    if (it == g_.param_index.end()) return;
    const BufferDecl& input = fn.buffers[it->second];
    if (input.type != te::ScalarType::kF32 || input.storage || input.local ||
        g_.shapes[it->second] != conv->inputs[0]->type.shape) {
      return;
    }
    plain_input_ = it->second;
  }

  // kiln_pad_planes over `planes` input channels from channel `c` of image
  // `n`, into `place` of the padded buffer, padded rows [y_begin, y_end) of
  // each phase.
  Stmt PadCall(const Node* conv, int padded, const std::vector<int64_t>& shape, const Expr& n,
               const Expr& c, const PaddedPlace& place, int64_t planes, const Expr& y_begin,
               const Expr& y_end) {
    const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
    const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;
    std::vector<CallArg> args{
        {padded, PaddedIndex(shape, place, 0, b_.Int(0), b_.Int(0), b_.Int(0))},
        {plain_input_, g_.FlatIndex(xs, {n, c, b_.Int(0), b_.Int(0)})}};
    for (int64_t v : {planes, xs[2], xs[3], shape[2], shape[3], shape[4], shape[5], a.padding[0],
                      a.padding[1]}) {
      args.push_back({-1, b_.Int(v)});
    }
    args.push_back({-1, y_begin});
    args.push_back({-1, y_end});
    return MakeCall(abi::kPadPlanes, std::move(args));
  }

 private:
  GroupContext& g_;
  te::ExprBuilder& b_;
  int plain_input_ = -1;
};

}  // namespace

// The group's conv2d when the contraction schedule can read its input in
// place after padding (dilation 1, any stride up to 4; grouped and
// depthwise too) and it is the group's only anchor, producing the root's
// shape.
const Node* InPlaceConv(const GroupContext& g) {
  const Node* conv = nullptr;
  for (const Node* m : g.members) {
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
  if (conv->type.shape != g.members.back()->type.shape) return nullptr;
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
bool IsPointwiseWithoutPadding(const Node* conv) {
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
  const std::vector<int64_t>& ws = conv->inputs[1]->type.shape;
  const auto zero = [](int64_t p) { return p == 0; };
  return ws[2] == 1 && ws[3] == 1 && std::all_of(a.padding.begin(), a.padding.end(), zero);
}

Stmt PadConvInput(GroupContext& g, const Node* conv, LoopFunction& fn, ContractionTarget& target,
                  te::Expr& value, bool& by_rows) {
  return ConvPadder(g).PadConvInput(conv, fn, target, value, by_rows);
}

std::optional<Stmt> FillPerChannel(GroupContext& g, const Node* conv, LoopFunction& fn,
                                   const ContractionTarget& target, const Stmt& main) {
  return ConvPadder(g).FillPerChannel(conv, fn, target, main);
}

std::optional<Stmt> FillPerImage(GroupContext& g, const Node* conv, LoopFunction& fn,
                                 const ContractionTarget& target, const Stmt& main) {
  return ConvPadder(g).FillPerImage(conv, fn, target, main);
}

}  // namespace kiln::lower
