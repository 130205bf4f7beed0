// Winograd's F(2x2, 3x3), F(3x3, 3x3) and F(4x4, 3x3) for a blocked conv
// (conv2d_nchwc_winograd_f2, _f3 and _f4, chosen by WinogradConv).
//
// Design note
// -----------
// For an m x m tile of outputs at (m th, m tw), an alpha x alpha tile d
// (alpha = m + 2) of each input channel, from (m th - pad, m tw - pad),
// gives the tile's alpha^2 products
//     V = Bt d B          (input transform: adds and small multiples)
//     M[e] = sum_c V_c[e] * U_c,o[e]     for e < alpha^2, U = G g Gt
//     Y = At M A          (output transform)
// (Lavin and Gray's construction: points 0, 1, -1 and infinity for m = 2,
// 2 too for m = 3, and 2, -2 for m = 4). The sums over c are alpha^2 independent GEMMs,
// tiles x C times C x O, which the contraction schedule tiles like any
// batched matmul, with U packed at compile time. The kernel runs three
// stages over two temporaries:
//     V (alpha^2, tiles, C): the input copied into a zero-padded buffer of
//       whole tiles (m TH + 2 rows: a ragged last tile reads zeros, not past
//       the input; a fused prologue runs there, once per element), then per
//       input tile and block of 16 channels alpha^2 vector loads, the
//       transform in registers, alpha^2 whole-line stores;
//     M (alpha^2, tiles, O) = V[e] x U[e], the schedule's loops;
//     per output tile and block: alpha^2 line loads of M, the transform
//       back, the bias and the group's epilogue (relu, a residual add) per
//       output pixel, stored as whole lines. A ragged last row or column of
//       tiles (14x14 outputs in 4x4 tiles) stores only the pixels inside.
// Tiles are numbered (n, th, tw), so V[e] is row-major tiles x C and a
// tile's K run is contiguous: the schedule reads it in place.
// The transforms are written out with their common terms shared (the
// builder interns equal expressions, codegen emits each once): for m = 4
// about 80 adds and multiplies per 36 input lines, 50 per 36 output lines.
#include "compiler/lower/winograd_conv.h"

#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <variant>

#include "common/int_math.h"
#include "compiler/ir/op_def.h"
#include "compiler/lower/blocked_conv.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::Var;

// One of Winograd's algorithms F(m x m, 3x3): m x m outputs from an
// alpha x alpha input tile (alpha = m + 2), the matrices written out as
// functions with their common terms shared (the builder interns equal
// expressions and codegen emits each once).
struct Algorithm {
  int tile;                                                                 // m
  int alpha;                                                                // m + 2
  std::vector<Expr> (*input)(te::ExprBuilder&, const std::vector<Expr>&);   // Bt d
  std::vector<Expr> (*output)(te::ExprBuilder&, const std::vector<Expr>&);  // At m
  std::vector<std::array<double, 3>> g;                                     // G
};

// F(2x2, 3x3), points 0, 1, -1 and infinity.
std::vector<Expr> InputF2(te::ExprBuilder& b, const std::vector<Expr>& d) {
  return {b.Sub(d[0], d[2]), b.Add(d[1], d[2]), b.Sub(d[2], d[1]), b.Sub(d[1], d[3])};
}
std::vector<Expr> OutputF2(te::ExprBuilder& b, const std::vector<Expr>& m) {
  return {b.Add(b.Add(m[0], m[1]), m[2]), b.Sub(b.Sub(m[1], m[2]), m[3])};
}

// F(4x4, 3x3), points 0, 1, -1, 2, -2 and infinity.
std::vector<Expr> InputF4(te::ExprBuilder& b, const std::vector<Expr>& d) {
  const Expr two = b.Float(2), four = b.Float(4), five = b.Float(5);
  const Expr d42 = b.Sub(d[4], d[2]), d31 = b.Sub(d[3], d[1]);
  const Expr d12 = b.Add(d[1], d[2]), d34 = b.Add(d[3], d[4]);
  return {b.Add(b.Sub(b.Mul(four, d[0]), b.Mul(five, d[2])), d[4]),
          b.Sub(d34, b.Mul(four, d12)),
          b.Add(b.Sub(d[4], d[3]), b.Mul(four, b.Sub(d[1], d[2]))),
          b.Add(d42, b.Mul(two, d31)),
          b.Sub(d42, b.Mul(two, d31)),
          b.Add(b.Sub(b.Mul(four, d[1]), b.Mul(five, d[3])), d[5])};
}
std::vector<Expr> OutputF4(te::ExprBuilder& b, const std::vector<Expr>& m) {
  const Expr p12 = b.Add(m[1], m[2]), m12 = b.Sub(m[1], m[2]);
  const Expr p34 = b.Add(m[3], m[4]), m34 = b.Sub(m[3], m[4]);
  return {b.Add(b.Add(m[0], p12), p34), b.Add(m12, b.Mul(b.Float(2), m34)),
          b.Add(p12, b.Mul(b.Float(4), p34)), b.Add(b.Add(m12, b.Mul(b.Float(8), m34)), m[5])};
}

// F(3x3, 3x3), points 0, 1, -1, 2 and infinity.
std::vector<Expr> InputF3(te::ExprBuilder& b, const std::vector<Expr>& d) {
  const Expr two = b.Float(2), three = b.Float(3);
  const Expr d31 = b.Sub(d[3], d[1]);
  return {b.Add(b.Sub(b.Mul(two, b.Sub(d[0], d[2])), d[1]), d[3]),
          b.Sub(b.Sub(d[3], d[2]), b.Mul(two, d[1])),
          b.Add(b.Sub(b.Mul(two, d[1]), b.Mul(three, d[2])), d[3]), d31,
          b.Add(b.Sub(b.Mul(two, b.Sub(d[1], d[3])), d[2]), d[4])};
}
std::vector<Expr> OutputF3(te::ExprBuilder& b, const std::vector<Expr>& m) {
  const Expr p12 = b.Add(m[1], m[2]);
  return {b.Add(b.Add(m[0], p12), m[3]), b.Add(b.Sub(m[1], m[2]), b.Mul(b.Float(2), m[3])),
          b.Add(b.Add(p12, b.Mul(b.Float(4), m[3])), m[4])};
}

const Algorithm& AlgorithmFor(int tile) {
  static const Algorithm f2{
      2, 4, InputF2, OutputF2, {{{1, 0, 0}}, {{0.5, 0.5, 0.5}}, {{0.5, -0.5, 0.5}}, {{0, 0, 1}}}};
  static const Algorithm f4{4,
                            6,
                            InputF4,
                            OutputF4,
                            {{{1.0 / 4, 0, 0}},
                             {{-1.0 / 6, -1.0 / 6, -1.0 / 6}},
                             {{-1.0 / 6, 1.0 / 6, -1.0 / 6}},
                             {{1.0 / 24, 1.0 / 12, 1.0 / 6}},
                             {{1.0 / 24, -1.0 / 12, 1.0 / 6}},
                             {{0, 0, 1}}}};
  static const Algorithm f3{3,
                            5,
                            InputF3,
                            OutputF3,
                            {{{1.0 / 2, 0, 0}},
                             {{-1.0 / 2, -1.0 / 2, -1.0 / 2}},
                             {{-1.0 / 6, 1.0 / 6, -1.0 / 6}},
                             {{1.0 / 6, 1.0 / 3, 2.0 / 3}},
                             {{0, 0, 1}}}};
  return tile == 2 ? f2 : tile == 3 ? f3 : f4;
}

// The rows of each of V's and M's alpha^2 planes: the tiles, and one more
// where planes of `width` floats would start a multiple of 4 KB apart. A
// tile's transforms store (and load) one line in each plane; planes 4 KB
// apart put all 16 to 36 lines in one L1 set, more than its ways: on an AMD
// EPYC (Zen 5, 12-way L1), resnet18's 56x56 convs (784 tiles x 64
// channels, planes 49 x 4 KB) spent 0.122 ms on the input transform where
// the 28x28 ones (half the data, planes 24.5 x 4 KB) spent 0.022 ms.
int64_t PlaneRows(int64_t tiles, int64_t width) {
  return tiles * width * 4 % 4096 == 0 ? tiles + 1 : tiles;
}

}  // namespace

const Node* WinogradConv(const GroupContext& g) {
  for (const char* op :
       {"conv2d_nchwc_winograd_f2", "conv2d_nchwc_winograd_f3", "conv2d_nchwc_winograd_f4"}) {
    if (const Node* conv = LoneAnchor(g, op)) return conv;
  }
  return nullptr;
}

int WinogradTile(const Node* conv) { return conv->op->name.back() - '0'; }

std::shared_ptr<const ConstantData> WinogradWeights(const ConstantData& weights, int tile) {
  const Algorithm& alg = AlgorithmFor(tile);
  const int alpha = alg.alpha, products = alpha * alpha;
  const std::vector<int64_t>& s = weights.type.shape;  // (OB, CB, 3, 3, 16, 16)
  const int64_t ob_count = s[0], cb_count = s[1], lanes = s[4];
  const int64_t c_count = cb_count * lanes, o_count = ob_count * s[5];
  auto out = std::make_shared<ConstantData>();
  out->type = TensorType{DType::kFloat32, {products, c_count, o_count}};
  out->bytes = ConstantBytes::Aligned(static_cast<size_t>(products * c_count * o_count) * 4);
  float* u = reinterpret_cast<float*>(out->bytes.data());
  const float* w = weights.data<float>();
  // Output channels innermost: each (c, o) reads along oi and writes U's 36
  // rows along o.
  for (int64_t cb = 0; cb < cb_count; ++cb) {
    for (int64_t ci = 0; ci < lanes; ++ci) {
      for (int64_t ob = 0; ob < ob_count; ++ob) {
        for (int64_t oi = 0; oi < s[5]; ++oi) {
          double g[3][3];
          for (int ky = 0; ky < 3; ++ky) {
            for (int kx = 0; kx < 3; ++kx) {
              g[ky][kx] = w[((((ob * cb_count + cb) * 3 + ky) * 3 + kx) * lanes + ci) * s[5] + oi];
            }
          }
          const int64_t c = cb * lanes + ci, o = ob * s[5] + oi;
          for (int xi = 0; xi < alpha; ++xi) {
            const std::array<double, 3>& gr = alg.g[xi];
            double gx[3];  // row xi of G g
            for (int kx = 0; kx < 3; ++kx) {
              gx[kx] = gr[0] * g[0][kx] + gr[1] * g[1][kx] + gr[2] * g[2][kx];
            }
            for (int nu = 0; nu < alpha; ++nu) {
              const std::array<double, 3>& gc = alg.g[nu];
              const double v = gx[0] * gc[0] + gx[1] * gc[1] + gx[2] * gc[2];
              u[((xi * alpha + nu) * c_count + c) * o_count + o] = static_cast<float>(v);
            }
          }
        }
      }
    }
  }
  return out;
}

std::optional<WinogradStages> PrepareWinogradConv(GroupContext& g, const Node* conv,
                                                  LoopFunction& fn, ContractionTarget& target) {
  const Node* weight = conv->inputs[1];
  auto param = g.param_index.find(weight);
  if (param == g.param_index.end() || !weight->is_constant() ||
      weight->type.dtype != DType::kFloat32) {
    return std::nullopt;
  }
  te::ExprBuilder& b = g.b;
  const int tile = WinogradTile(conv);
  const Algorithm& alg = AlgorithmFor(tile);
  const int alpha = alg.alpha, products = alpha * alpha;
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv->attrs);
  const std::vector<int64_t>& xs = conv->inputs[0]->type.shape;  // (N, CB, H, W, 16)
  const std::vector<int64_t>& os = conv->type.shape;             // (N, OB, OH, OW, 16)
  const int64_t images = os[0], cbs = xs[1], obs = os[1];
  const int64_t channels = cbs * kLanes, outputs = obs * kLanes;
  const int64_t th_count = CeilDiv(os[2], tile), tw_count = CeilDiv(os[3], tile);
  const int64_t tiles = images * th_count * tw_count;
  const int64_t pt = a.padding[0], pl = a.padding[1];

  WinogradStages stages;
  stages.tile = tile;
  stages.weight_param = param->second;
  stages.weights = WinogradWeights(*weight->value, tile);
  stages.weight_elements = fn.buffers[param->second].num_elements;
  stages.weight_shape = g.shapes[param->second];
  fn.buffers[param->second].num_elements = products * channels * outputs;
  g.shapes[param->second] = {products, channels, outputs};
  const int64_t v_rows = PlaneRows(tiles, channels), m_rows = PlaneRows(tiles, outputs);
  const int v_buffer = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"winograd_input", te::ScalarType::kF32, products * v_rows * channels});
  g.shapes.push_back({products, v_rows, channels});
  const int m_buffer = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"winograd_products", te::ScalarType::kF32, products * m_rows * outputs});
  g.shapes.push_back({products, m_rows, outputs});
  const int out_buffer = fn.num_params - 1;
  // The input, zero-padded to whole tiles: rows m th - pt .. m th - pt + m + 1
  // of every tile are inside it, so the transform reads without checks.
  const std::vector<int64_t> padded_shape{images, cbs, tile * th_count + 2, tile * tw_count + 2,
                                          kLanes};
  const int padded = static_cast<int>(fn.buffers.size());
  fn.buffers.push_back({"padded_input", te::ScalarType::kF32,
                        images * cbs * padded_shape[2] * padded_shape[3] * kLanes});
  g.shapes.push_back(padded_shape);
  Stmt fill = ZeroPaddedCopy(g, conv->inputs[0], padded, padded_shape, pt, pl);

  Var l = b.NewVar("l", kLanes);
  const Expr lane = b.Ref(l);
  auto tile_index = [&](const Expr& n, const Expr& th, const Expr& tw) {
    return b.Add(b.Mul(b.Add(b.Mul(n, b.Int(th_count)), th), b.Int(tw_count)), tw);
  };

  // Input transform of the tile (n, th, tw), every channel block.
  Var cb = b.NewVar("cb", cbs);
  auto input_tile = [&](const Expr& n, const Expr& th, const Expr& tw) {
    std::vector<std::vector<Expr>> d(alpha, std::vector<Expr>(alpha));
    for (int r = 0; r < alpha; ++r) {
      const Expr y = b.Add(b.Mul(th, b.Int(tile)), b.Int(r));
      for (int c = 0; c < alpha; ++c) {
        const Expr x = b.Add(b.Mul(tw, b.Int(tile)), b.Int(c));
        d[r][c] = b.Load(padded, te::ScalarType::kF32, {n, b.Ref(cb), y, x, lane});
      }
    }
    std::vector<std::vector<Expr>> rows(alpha);  // rows[r] = Bt applied along row r
    for (int r = 0; r < alpha; ++r) rows[r] = alg.input(b, d[r]);
    const Expr p = tile_index(n, th, tw);
    const Expr c = b.Add(b.Mul(b.Ref(cb), b.Int(kLanes)), lane);
    std::unordered_map<const te::ExprNode*, Expr> flat;
    std::vector<Stmt> stores;
    for (int nu = 0; nu < alpha; ++nu) {
      std::vector<Expr> column(alpha);
      for (int r = 0; r < alpha; ++r) column[r] = rows[r][nu];
      const std::vector<Expr> v = alg.input(b, column);
      for (int xi = 0; xi < alpha; ++xi) {
        stores.push_back(MakeStore(v_buffer,
                                   g.FlatIndex(g.shapes[v_buffer], {b.Int(xi * alpha + nu), p, c}),
                                   g.Flatten(v[xi], flat)));
      }
    }
    return MakeFor(cb, ForKind::kSerial, MakeFor(l, ForKind::kVector, MakeSeq(std::move(stores))));
  };

  // Output transform of the tile (n, th, tw): its `rows` x `cols` pixels.
  Var ob = b.NewVar("ob", obs);
  auto output_tile = [&](const Expr& n, const Expr& th, const Expr& tw, int rows, int cols) {
    const Expr p = tile_index(n, th, tw);
    const Expr o = b.Add(b.Mul(b.Ref(ob), b.Int(kLanes)), lane);
    std::vector<std::vector<Expr>> columns(alpha);  // columns[nu] = At along column nu
    for (int nu = 0; nu < alpha; ++nu) {
      std::vector<Expr> m(alpha);
      for (int xi = 0; xi < alpha; ++xi) {
        m[xi] = b.Load(m_buffer, te::ScalarType::kF32, {b.Int(xi * alpha + nu), p, o});
      }
      columns[nu] = alg.output(b, m);
    }
    std::unordered_map<const te::ExprNode*, Expr> flat;
    std::vector<Stmt> stores;
    for (int r = 0; r < rows; ++r) {
      std::vector<Expr> row(alpha);
      for (int nu = 0; nu < alpha; ++nu) row[nu] = columns[nu][r];
      const std::vector<Expr> y = alg.output(b, row);
      for (int c = 0; c < cols; ++c) {
        std::vector<Expr> idx{n, b.Ref(ob), b.Add(b.Mul(th, b.Int(tile)), b.Int(r)),
                              b.Add(b.Mul(tw, b.Int(tile)), b.Int(c)), lane};
        Expr conv_value = y[c];
        if (conv->inputs.size() == 3) {
          conv_value = b.Add(conv_value, g.ValueOf(conv->inputs[2], {b.Ref(ob), lane}));
        }
        std::vector<const te::ExprNode*> key;
        for (const Expr& e : idx) key.push_back(e.get());
        g.memo[{conv, key}] = conv_value;
        Expr value = g.ValueOf(g.members.back(), idx);
        stores.push_back(MakeStore(out_buffer, g.FlatIndex(os, idx), g.Flatten(value, flat)));
      }
    }
    return MakeFor(ob, ForKind::kSerial, MakeFor(l, ForKind::kVector, MakeSeq(std::move(stores))));
  };

  // Both stages walk the tiles in ranges of rows [th0, th1) and columns
  // [tw0, tw1); `body` makes one tile's statement. The rows of the
  // parallel range run as (image, row) items.
  const int64_t work = tiles * products * (channels + outputs);
  const bool parallel = work >= kParallelWorkThreshold;
  using TileBody = std::function<Stmt(const Expr&, const Expr&, const Expr&)>;
  auto columns_of = [&](const Expr& n, const Expr& th, int64_t tw0, int64_t tw1,
                        const TileBody& body) -> Stmt {
    if (tw1 <= tw0) return nullptr;
    Var tw = b.NewVar("tw", tw1 - tw0);
    return MakeFor(tw, ForKind::kSerial, body(n, th, b.Add(b.Ref(tw), b.Int(tw0))));
  };
  auto rows_of = [&](int64_t th0, int64_t th1, bool in_parallel,
                     const std::function<Stmt(const Expr&, const Expr&)>& row) -> Stmt {
    if (th1 <= th0) return nullptr;
    Var item = b.NewVar("item", images * (th1 - th0));
    const Expr n = images == 1 ? b.Int(0) : b.Div(b.Ref(item), b.Int(th1 - th0));
    const Expr th =
        b.Add(th1 - th0 == 1 ? b.Int(0) : b.Mod(b.Ref(item), b.Int(th1 - th0)), b.Int(th0));
    return MakeFor(item, in_parallel && parallel ? ForKind::kParallel : ForKind::kSerial,
                   row(n, th));
  };
  auto seq = [](std::vector<Stmt> parts) {
    std::vector<Stmt> kept;
    for (Stmt& s : parts) {
      if (s) kept.push_back(std::move(s));
    }
    return MakeSeq(std::move(kept));
  };

  // The input stage: the padded copy, then every tile.
  stages.input_transform =
      MakeSeq({fill, rows_of(0, th_count, true, [&](const Expr& n, const Expr& th) {
                 return columns_of(n, th, 0, tw_count, input_tile);
               })});

  // The output stage: whole tiles, then the ragged last row and column.
  const int64_t th_whole = os[2] / tile, tw_whole = os[3] / tile;
  const int rows_left = static_cast<int>(os[2] % tile), cols_left = static_cast<int>(os[3] % tile);
  auto output_row = [&](int rows) {
    return [&, rows](const Expr& n, const Expr& th) {
      auto tile_of = [&](int cols) {
        return [&, cols](const Expr& n2, const Expr& th2, const Expr& tw) {
          return output_tile(n2, th2, tw, rows, cols);
        };
      };
      return seq({columns_of(n, th, 0, tw_whole, tile_of(tile)),
                  cols_left ? columns_of(n, th, tw_whole, tw_count, tile_of(cols_left)) : nullptr});
    };
  };
  stages.output_transform =
      seq({rows_of(0, th_whole, true, output_row(tile)),
           rows_left ? rows_of(th_whole, th_count, false, output_row(rows_left)) : nullptr});

  // The GEMMs: M[e][p][o] = sum_k V[e][p][k] * U[e][k][o].
  Var e = b.NewVar("e", products), p = b.NewVar("p", tiles), o = b.NewVar("o", outputs);
  Var k = b.NewVar("k", channels);
  Expr sum =
      b.Reduce(te::ReduceOp::kSum, {k},
               b.Mul(b.Load(v_buffer, te::ScalarType::kF32, {b.Ref(e), b.Ref(p), b.Ref(k)}),
                     b.Load(param->second, te::ScalarType::kF32, {b.Ref(e), b.Ref(k), b.Ref(o)})));
  target.out_vars = {e, p, o};
  target.out_index = g.FlatIndex(g.shapes[m_buffer], {b.Ref(e), b.Ref(p), b.Ref(o)});
  target.value = g.Flatten(sum);
  target.out_buffer = m_buffer;
  return stages;
}

}  // namespace kiln::lower
