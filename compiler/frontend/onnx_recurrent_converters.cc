// ONNX's recurrent layers: LSTM, GRU and RNN, every direction, initial
// states, peepholes, clip, per-batch sequence lengths (forward), layout 0
// and 1, the activations ONNX lists.
//
// Design: shapes are static, so the recurrence is unrolled over the
// sequence at import. The input projection of every time step is one
// matrix product (X W^T + biases for all steps at once, on the packed
// float32 kernels); each step then adds H R^T and applies its gates, which
// FuseOps fuses into the product's epilogue like any elementwise chain. The
// graph grows by about twenty nodes per step and direction, so a sequence
// of hundreds of steps costs compile time, not run time; a loop kernel of
// its own (Opaque) is the way past that, and this is where it would slot in.
#include <string>
#include <utility>
#include <vector>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {

enum class Cell { kLstm, kGru, kRnn };

constexpr int64_t kMaxUnrolledSteps = 2048;

// The gates per hidden unit and the activations a direction uses.
int GateCount(Cell cell) { return cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1; }
std::vector<std::string> DefaultActivations(Cell cell) {
  switch (cell) {
    case Cell::kLstm:
      return {"Sigmoid", "Tanh", "Tanh"};
    case Cell::kGru:
      return {"Sigmoid", "Tanh"};
    case Cell::kRnn:
      return {"Tanh"};
  }
  return {};
}

// One activation function by its ONNX name, with its alpha and beta.
struct Activation {
  std::string name;
  float alpha = 0;
  float beta = 0;
  bool has_alpha = false;
  bool has_beta = false;
};

class Recurrence {
 public:
  Recurrence(Converter& c, const onnx::NodeProto& n, Cell cell) : c_(c), n_(n), cell_(cell) {}

  absl::Status Convert() {
    KILN_RETURN_IF_ERROR(ReadOperands());
    std::vector<Node*> y_dirs, h_dirs, c_dirs;
    for (int64_t d = 0; d < directions_; ++d) {
      KILN_RETURN_IF_ERROR(RunDirection(d, y_dirs, h_dirs, c_dirs));
    }
    return DefineOutputs(y_dirs, h_dirs, c_dirs);
  }

 private:
  std::string Name(const std::string& what) const { return n_.name() + "/" + what; }
  absl::StatusOr<Node*> Add(const std::string& op, std::vector<Node*> in, Attrs attrs,
                            const std::string& suffix) {
    return c_.Add(n_, op, std::move(in), std::move(attrs), "/" + suffix);
  }
  absl::Status Invalid(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n_.name(), "' (", n_.op_type(), "): ", what));
  }
  absl::Status Unsupported(const std::string& what) const {
    return absl::UnimplementedError(
        absl::StrCat("node '", n_.name(), "' (", n_.op_type(), "): ", what));
  }

  absl::Status ReadOperands() {
    KILN_ASSIGN_OR_RETURN(x_, c_.Value(n_, 0));
    KILN_ASSIGN_OR_RETURN(w_, c_.Value(n_, 1));
    KILN_ASSIGN_OR_RETURN(r_, c_.Value(n_, 2));
    KILN_ASSIGN_OR_RETURN(b_, OptionalValue(c_, n_, 3));
    KILN_ASSIGN_OR_RETURN(lengths_, OptionalValue(c_, n_, 4));
    KILN_ASSIGN_OR_RETURN(h0_, OptionalValue(c_, n_, 5));
    if (cell_ == Cell::kLstm) {
      KILN_ASSIGN_OR_RETURN(c0_, OptionalValue(c_, n_, 6));
      KILN_ASSIGN_OR_RETURN(peepholes_, OptionalValue(c_, n_, 7));
      if (IntAttr(n_, "input_forget", 0) != 0) return Unsupported("input_forget = 1");
    }
    layout_ = IntAttr(n_, "layout", 0);
    const std::string direction = StringAttr(n_, "direction", "forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
      return Invalid("direction '" + direction + "'");
    }
    reverse_only_ = direction == "reverse";
    directions_ = direction == "bidirectional" ? 2 : 1;
    if (x_->type.rank() != 3 || !IsFloatDType(x_->type.dtype)) {
      return Invalid("X must be a 3-D float tensor, got " + x_->type.ToString());
    }
    if (layout_ == 1) {  // [batch, seq, input] -> [seq, batch, input]
      KILN_ASSIGN_OR_RETURN(x_, Add("transpose", {x_}, TransposeAttrs{{1, 0, 2}}, "x_seq_major"));
    }
    seq_ = x_->type.shape[0];
    batch_ = x_->type.shape[1];
    // Unrolled, each step and direction adds about twenty nodes: past this
    // the graph (and its compile) grows beyond what unrolling is for.
    if (seq_ * directions_ > kMaxUnrolledSteps) {
      return Unsupported(absl::StrCat("a sequence of ", seq_, " steps in ", directions_,
                                      " direction(s): the unrolled recurrence takes at most ",
                                      kMaxUnrolledSteps, " steps"));
    }
    hidden_ =
        IntAttr(n_, "hidden_size", w_->type.rank() == 3 ? w_->type.shape[1] / GateCount(cell_) : 0);
    const int64_t gates = GateCount(cell_) * hidden_;
    if (w_->type.rank() != 3 || w_->type.shape[0] != directions_ || w_->type.shape[1] != gates ||
        w_->type.shape[2] != x_->type.shape[2] || r_->type.rank() != 3 ||
        r_->type.shape != std::vector<int64_t>{directions_, gates, hidden_}) {
      return Invalid(absl::StrCat("W ", w_->type.ToString(), " and R ", r_->type.ToString(),
                                  " do not match ", directions_, " direction(s), hidden size ",
                                  hidden_, " and X ", x_->type.ToString()));
    }
    if (b_ != nullptr && b_->type.shape != std::vector<int64_t>{directions_, 2 * gates}) {
      return Invalid("B " + b_->type.ToString() + " must be [directions, 2 * gates * hidden]");
    }
    KILN_RETURN_IF_ERROR(ReadActivations());
    return ReadLengths();
  }

  absl::Status ReadActivations() {
    std::vector<std::string> names;
    if (const onnx::AttributeProto* a = FindAttr(n_, "activations")) {
      names.assign(a->strings().begin(), a->strings().end());
    } else {
      for (int64_t d = 0; d < directions_; ++d) {
        for (const std::string& s : DefaultActivations(cell_)) names.push_back(s);
      }
    }
    const size_t per_direction = DefaultActivations(cell_).size();
    if (names.size() != per_direction * directions_) {
      return Invalid(
          absl::StrCat("wants ", per_direction * directions_, " activations, got ", names.size()));
    }
    const onnx::AttributeProto* alphas = FindAttr(n_, "activation_alpha");
    const onnx::AttributeProto* betas = FindAttr(n_, "activation_beta");
    for (size_t i = 0; i < names.size(); ++i) {
      Activation a;
      a.name = names[i];
      if (alphas != nullptr && static_cast<int>(i) < alphas->floats_size()) {
        a.alpha = alphas->floats(static_cast<int>(i));
        a.has_alpha = true;
      }
      if (betas != nullptr && static_cast<int>(i) < betas->floats_size()) {
        a.beta = betas->floats(static_cast<int>(i));
        a.has_beta = true;
      }
      activations_.push_back(a);
    }
    if (const onnx::AttributeProto* clip = FindAttr(n_, "clip")) {
      if (!(clip->f() > 0)) return Invalid("clip must be positive");
      clip_ = clip->f();
    }
    return absl::OkStatus();
  }

  // Per-batch lengths: ignored when every one is the full sequence; else
  // steps past a sequence's end keep its state and output zeros (forward).
  absl::Status ReadLengths() {
    if (lengths_ == nullptr) return absl::OkStatus();
    if (lengths_->type.shape != std::vector<int64_t>{batch_} ||
        !IsIntegerDType(lengths_->type.dtype)) {
      return Invalid("sequence_lens must be integers [batch], got " + lengths_->type.ToString());
    }
    if (lengths_->is_constant()) {
      bool all_full = true;
      for (int64_t b = 0; b < batch_; ++b) {
        const int64_t len =
            ReadElementAsInt(lengths_->type.dtype, lengths_->value->bytes.data(), b);
        if (len < 0 || len > seq_) return Invalid(absl::StrCat("sequence length ", len));
        all_full &= len == seq_;
      }
      if (all_full) lengths_ = nullptr;
    }
    if (lengths_ != nullptr && (directions_ == 2 || reverse_only_)) {
      return Unsupported("sequence_lens shorter than the sequence in the reverse direction");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Node*> Activate(const Activation& a, Node* x, const std::string& suffix) {
    const std::string& f = a.name;
    if (f == "Sigmoid") return Add("sigmoid", {x}, NoAttrs{}, suffix);
    if (f == "Tanh") return Add("tanh", {x}, NoAttrs{}, suffix);
    if (f == "Relu") return Add("relu", {x}, NoAttrs{}, suffix);
    if (f == "Softsign") return Add("softsign", {x}, NoAttrs{}, suffix);
    if (f == "Softplus") return Add("softplus", {x}, NoAttrs{}, suffix);
    if (f == "HardSigmoid") {
      return Add("hard_sigmoid", {x},
                 ActivationAttrs{a.has_alpha ? a.alpha : 0.2f, a.has_beta ? a.beta : 0.5f}, suffix);
    }
    if (f == "LeakyRelu") {
      return Add("leaky_relu", {x}, ActivationAttrs{a.has_alpha ? a.alpha : 0.01f, 0}, suffix);
    }
    if (f == "Elu")
      return Add("elu", {x}, ActivationAttrs{a.has_alpha ? a.alpha : 1.0f, 0}, suffix);
    return Unsupported("activation '" + f + "'");
  }

  // Row `d` of a [directions, ...] operand, without its first dim.
  absl::StatusOr<Node*> Direction(Node* v, int64_t d, const std::string& suffix) {
    std::vector<int64_t> starts(v->type.rank(), 0), steps(v->type.rank(), 1);
    std::vector<int64_t> sizes = v->type.shape;
    starts[0] = d;
    sizes[0] = 1;
    KILN_ASSIGN_OR_RETURN(Node * row, Add("slice", {v}, SliceAttrs{starts, steps, sizes}, suffix));
    std::vector<int64_t> shape(v->type.shape.begin() + 1, v->type.shape.end());
    return Add("reshape", {row}, ReshapeAttrs{shape}, suffix + "_rows");
  }

  // Columns [k * hidden, (k + 1) * hidden) of a [..., gates * hidden] tensor.
  absl::StatusOr<Node*> Gate(Node* v, int k, const std::string& suffix) {
    const int64_t rank = v->type.rank();
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = v->type.shape;
    starts[rank - 1] = k * hidden_;
    sizes[rank - 1] = hidden_;
    return Add("slice", {v}, SliceAttrs{starts, steps, sizes}, suffix);
  }

  absl::StatusOr<Node*> Clipped(Node* v, const std::string& suffix) {
    if (!clip_) return v;
    return Add("clip", {v}, ActivationAttrs{-*clip_, *clip_}, suffix + "_clip");
  }

  // The initial state of direction d ([batch, hidden]), zeros when absent.
  absl::StatusOr<Node*> Initial(Node* given, int64_t d, const std::string& what) {
    if (given == nullptr) {
      Node* zero = c_.ScalarOf(Name(what + "_zero"), x_->type.dtype, 0);
      return Add("expand", {zero}, ReshapeAttrs{{batch_, hidden_}}, what + "_zeros");
    }
    if (layout_ == 1) {  // [batch, directions, hidden]
      KILN_ASSIGN_OR_RETURN(
          given, Add("transpose", {given}, TransposeAttrs{{1, 0, 2}}, what + "_direction_major"));
    }
    return Direction(given, d, absl::StrCat(what, d));
  }

  absl::Status RunDirection(int64_t d, std::vector<Node*>& y_dirs, std::vector<Node*>& h_dirs,
                            std::vector<Node*>& c_dirs) {
    const std::string tag = absl::StrCat("d", d);
    const bool backward = reverse_only_ || d == 1;
    const size_t per_direction = DefaultActivations(cell_).size();
    const Activation* act = &activations_[d * per_direction];
    KILN_ASSIGN_OR_RETURN(Node * w, Direction(w_, d, tag + "_w"));
    KILN_ASSIGN_OR_RETURN(Node * r, Direction(r_, d, tag + "_r"));
    const int64_t gates = GateCount(cell_) * hidden_;
    Node* input_bias = nullptr;   // Wb + Rb (GRU with linear_before_reset: Wb + Rb[z, r] only)
    Node* hidden_bias = nullptr;  // GRU with linear_before_reset: Rb[h]
    const bool linear_before_reset =
        cell_ == Cell::kGru && IntAttr(n_, "linear_before_reset", 0) != 0;
    if (b_ != nullptr) {
      KILN_ASSIGN_OR_RETURN(Node * b, Direction(b_, d, tag + "_b"));
      KILN_ASSIGN_OR_RETURN(Node * wb,
                            Add("slice", {b}, SliceAttrs{{0}, {1}, {gates}}, tag + "_wb"));
      KILN_ASSIGN_OR_RETURN(Node * rb,
                            Add("slice", {b}, SliceAttrs{{gates}, {1}, {gates}}, tag + "_rb"));
      if (linear_before_reset) {
        KILN_ASSIGN_OR_RETURN(hidden_bias, Gate(rb, 2, tag + "_rb_h"));
        KILN_ASSIGN_OR_RETURN(
            Node * rb_zr, Add("slice", {rb}, SliceAttrs{{0}, {1}, {2 * hidden_}}, tag + "_rb_zr"));
        KILN_ASSIGN_OR_RETURN(
            Node * zeros,
            Add("mul", {hidden_bias, c_.ScalarOf(Name(tag + "_0"), x_->type.dtype, 0)}, NoAttrs{},
                tag + "_rb_h_zero"));
        KILN_ASSIGN_OR_RETURN(rb, Add("concat", {rb_zr, zeros}, AxisAttrs{0}, tag + "_rb_used"));
      }
      KILN_ASSIGN_OR_RETURN(input_bias, Add("add", {wb, rb}, NoAttrs{}, tag + "_bias"));
    }
    // Every step's input projection at once: [seq, batch, gates].
    std::vector<Node*> xw_in{x_, w};
    if (input_bias != nullptr) xw_in.push_back(input_bias);
    KILN_ASSIGN_OR_RETURN(Node * xw, Add("dense", xw_in, NoAttrs{}, tag + "_xw"));
    Node* p_i = nullptr;
    Node* p_o = nullptr;
    Node* p_f = nullptr;
    if (peepholes_ != nullptr) {
      KILN_ASSIGN_OR_RETURN(Node * p, Direction(peepholes_, d, tag + "_p"));
      KILN_ASSIGN_OR_RETURN(p_i, Gate(p, 0, tag + "_p_i"));
      KILN_ASSIGN_OR_RETURN(p_o, Gate(p, 1, tag + "_p_o"));
      KILN_ASSIGN_OR_RETURN(p_f, Gate(p, 2, tag + "_p_f"));
    }
    KILN_ASSIGN_OR_RETURN(Node * h, Initial(h0_, d, tag + "_h0"));
    Node* cell_state = nullptr;
    if (cell_ == Cell::kLstm) {
      KILN_ASSIGN_OR_RETURN(cell_state, Initial(c0_, d, tag + "_c0"));
    }
    std::vector<Node*> ys(seq_);
    for (int64_t step = 0; step < seq_; ++step) {
      const int64_t t = backward ? seq_ - 1 - step : step;
      const std::string s = absl::StrCat(tag, "_t", t);
      KILN_ASSIGN_OR_RETURN(
          Node * xt,
          Add("slice", {xw}, SliceAttrs{{t, 0, 0}, {1, 1, 1}, {1, batch_, gates}}, s + "_xw"));
      KILN_ASSIGN_OR_RETURN(xt, Add("reshape", {xt}, ReshapeAttrs{{batch_, gates}}, s + "_xw2"));
      KILN_ASSIGN_OR_RETURN(Node * hr, Add("dense", {h, r}, NoAttrs{}, s + "_hr"));
      Node* h_new = nullptr;
      Node* c_new = nullptr;
      if (cell_ == Cell::kLstm) {
        KILN_ASSIGN_OR_RETURN(Node * pre, Add("add", {xt, hr}, NoAttrs{}, s + "_pre"));
        std::vector<Node*> g(4);
        for (int k = 0; k < 4; ++k) {
          KILN_ASSIGN_OR_RETURN(g[k], Gate(pre, k, absl::StrCat(s, "_g", k)));
        }
        // Gates in W's order: i, o, f, c.
        if (p_i != nullptr) {
          KILN_ASSIGN_OR_RETURN(Node * pi, Add("mul", {p_i, cell_state}, NoAttrs{}, s + "_pi"));
          KILN_ASSIGN_OR_RETURN(g[0], Add("add", {g[0], pi}, NoAttrs{}, s + "_i_peep"));
          KILN_ASSIGN_OR_RETURN(Node * pf, Add("mul", {p_f, cell_state}, NoAttrs{}, s + "_pf"));
          KILN_ASSIGN_OR_RETURN(g[2], Add("add", {g[2], pf}, NoAttrs{}, s + "_f_peep"));
        }
        KILN_ASSIGN_OR_RETURN(Node * i, Clipped(g[0], s + "_i_pre"));
        KILN_ASSIGN_OR_RETURN(i, Activate(act[0], i, s + "_i"));
        KILN_ASSIGN_OR_RETURN(Node * f, Clipped(g[2], s + "_f_pre"));
        KILN_ASSIGN_OR_RETURN(f, Activate(act[0], f, s + "_f"));
        KILN_ASSIGN_OR_RETURN(Node * cc, Clipped(g[3], s + "_c_pre"));
        KILN_ASSIGN_OR_RETURN(cc, Activate(act[1], cc, s + "_cand"));
        KILN_ASSIGN_OR_RETURN(Node * keep, Add("mul", {f, cell_state}, NoAttrs{}, s + "_keep"));
        KILN_ASSIGN_OR_RETURN(Node * write, Add("mul", {i, cc}, NoAttrs{}, s + "_write"));
        KILN_ASSIGN_OR_RETURN(c_new, Add("add", {keep, write}, NoAttrs{}, s + "_c"));
        Node* o_pre = g[1];
        if (p_o != nullptr) {
          KILN_ASSIGN_OR_RETURN(Node * po, Add("mul", {p_o, c_new}, NoAttrs{}, s + "_po"));
          KILN_ASSIGN_OR_RETURN(o_pre, Add("add", {o_pre, po}, NoAttrs{}, s + "_o_peep"));
        }
        KILN_ASSIGN_OR_RETURN(Node * o, Clipped(o_pre, s + "_o_pre"));
        KILN_ASSIGN_OR_RETURN(o, Activate(act[0], o, s + "_o"));
        KILN_ASSIGN_OR_RETURN(Node * hc, Activate(act[2], c_new, s + "_hc"));
        KILN_ASSIGN_OR_RETURN(h_new, Add("mul", {o, hc}, NoAttrs{}, s + "_h"));
      } else if (cell_ == Cell::kGru) {
        // Gates in W's order: z, r, h.
        std::vector<Node*> xg(3), hg(3);
        for (int k = 0; k < 3; ++k) {
          KILN_ASSIGN_OR_RETURN(xg[k], Gate(xt, k, absl::StrCat(s, "_x", k)));
          KILN_ASSIGN_OR_RETURN(hg[k], Gate(hr, k, absl::StrCat(s, "_h", k)));
        }
        KILN_ASSIGN_OR_RETURN(Node * z, Add("add", {xg[0], hg[0]}, NoAttrs{}, s + "_z_pre"));
        KILN_ASSIGN_OR_RETURN(z, Clipped(z, s + "_z_sum"));
        KILN_ASSIGN_OR_RETURN(z, Activate(act[0], z, s + "_z"));
        KILN_ASSIGN_OR_RETURN(Node * rg, Add("add", {xg[1], hg[1]}, NoAttrs{}, s + "_r_pre"));
        KILN_ASSIGN_OR_RETURN(rg, Clipped(rg, s + "_r_sum"));
        KILN_ASSIGN_OR_RETURN(rg, Activate(act[0], rg, s + "_r"));
        Node* candidate_in;
        if (linear_before_reset) {
          Node* hh = hg[2];
          if (hidden_bias != nullptr) {
            KILN_ASSIGN_OR_RETURN(hh, Add("add", {hh, hidden_bias}, NoAttrs{}, s + "_hh_b"));
          }
          KILN_ASSIGN_OR_RETURN(Node * reset, Add("mul", {rg, hh}, NoAttrs{}, s + "_reset"));
          KILN_ASSIGN_OR_RETURN(candidate_in, Add("add", {xg[2], reset}, NoAttrs{}, s + "_n_pre"));
        } else {
          // (r * H) R_h^T: the reset applies before the product.
          KILN_ASSIGN_OR_RETURN(Node * rh, Add("mul", {rg, h}, NoAttrs{}, s + "_rh"));
          std::vector<int64_t> starts{2 * hidden_, 0}, steps{1, 1}, sizes{hidden_, hidden_};
          KILN_ASSIGN_OR_RETURN(Node * rh_w,
                                Add("slice", {r}, SliceAttrs{starts, steps, sizes}, s + "_Rh"));
          KILN_ASSIGN_OR_RETURN(Node * rhr, Add("dense", {rh, rh_w}, NoAttrs{}, s + "_rhr"));
          KILN_ASSIGN_OR_RETURN(candidate_in, Add("add", {xg[2], rhr}, NoAttrs{}, s + "_n_pre"));
        }
        KILN_ASSIGN_OR_RETURN(candidate_in, Clipped(candidate_in, s + "_n_sum"));
        KILN_ASSIGN_OR_RETURN(Node * candidate, Activate(act[1], candidate_in, s + "_n"));
        // (1 - z) * candidate + z * H = candidate + z * (H - candidate).
        KILN_ASSIGN_OR_RETURN(Node * diff, Add("sub", {h, candidate}, NoAttrs{}, s + "_diff"));
        KILN_ASSIGN_OR_RETURN(Node * zd, Add("mul", {z, diff}, NoAttrs{}, s + "_zd"));
        KILN_ASSIGN_OR_RETURN(h_new, Add("add", {candidate, zd}, NoAttrs{}, s + "_h"));
      } else {
        KILN_ASSIGN_OR_RETURN(Node * pre, Add("add", {xt, hr}, NoAttrs{}, s + "_pre"));
        KILN_ASSIGN_OR_RETURN(pre, Clipped(pre, s + "_sum"));
        KILN_ASSIGN_OR_RETURN(h_new, Activate(act[0], pre, s + "_h"));
      }
      Node* y = h_new;
      if (lengths_ != nullptr) {
        // Steps past a sequence's end: state kept, output 0.
        Node* now = c_.ScalarOf(Name(s + "_now"), lengths_->type.dtype, static_cast<double>(t));
        KILN_ASSIGN_OR_RETURN(Node * live, Add("less", {now, lengths_}, NoAttrs{}, s + "_live"));
        KILN_ASSIGN_OR_RETURN(live,
                              Add("reshape", {live}, ReshapeAttrs{{batch_, 1}}, s + "_live2"));
        KILN_ASSIGN_OR_RETURN(h_new, Add("where", {live, h_new, h}, NoAttrs{}, s + "_h_kept"));
        if (c_new != nullptr) {
          KILN_ASSIGN_OR_RETURN(c_new,
                                Add("where", {live, c_new, cell_state}, NoAttrs{}, s + "_c_kept"));
        }
        Node* zero = c_.ScalarOf(Name(s + "_y0"), x_->type.dtype, 0);
        KILN_ASSIGN_OR_RETURN(y, Add("where", {live, h_new, zero}, NoAttrs{}, s + "_y"));
      }
      h = h_new;
      cell_state = c_new;
      ys[t] = y;
    }
    if (WantsOutput(0)) {
      std::vector<Node*> steps;
      for (int64_t t = 0; t < seq_; ++t) {
        KILN_ASSIGN_OR_RETURN(Node * yt,
                              Add("reshape", {ys[t]}, ReshapeAttrs{{1, 1, batch_, hidden_}},
                                  absl::StrCat(tag, "_y", t)));
        steps.push_back(yt);
      }
      KILN_ASSIGN_OR_RETURN(Node * y, steps.size() == 1
                                          ? absl::StatusOr<Node*>(steps[0])
                                          : Add("concat", steps, AxisAttrs{0}, tag + "_y"));
      y_dirs.push_back(y);
    }
    KILN_ASSIGN_OR_RETURN(Node * h_last,
                          Add("reshape", {h}, ReshapeAttrs{{1, batch_, hidden_}}, tag + "_h_last"));
    h_dirs.push_back(h_last);
    if (cell_state != nullptr) {
      KILN_ASSIGN_OR_RETURN(
          Node * c_last,
          Add("reshape", {cell_state}, ReshapeAttrs{{1, batch_, hidden_}}, tag + "_c_last"));
      c_dirs.push_back(c_last);
    }
    return absl::OkStatus();
  }

  bool WantsOutput(int i) const { return n_.output_size() > i && !n_.output(i).empty(); }

  absl::StatusOr<Node*> Join(std::vector<Node*> parts, int64_t axis, const std::string& suffix) {
    if (parts.size() == 1) return parts[0];
    return Add("concat", std::move(parts), AxisAttrs{axis}, suffix);
  }

  absl::Status DefineOutputs(const std::vector<Node*>& y_dirs, const std::vector<Node*>& h_dirs,
                             const std::vector<Node*>& c_dirs) {
    if (WantsOutput(0)) {
      KILN_ASSIGN_OR_RETURN(Node * y, Join(y_dirs, 1, "y"));  // [seq, dirs, batch, hidden]
      if (layout_ == 1) {
        KILN_ASSIGN_OR_RETURN(y, Add("transpose", {y}, TransposeAttrs{{2, 0, 1, 3}}, "y_batch"));
      }
      KILN_RETURN_IF_ERROR(c_.Define(n_.output(0), y));
    }
    std::vector<std::pair<int, const std::vector<Node*>*>> states{{1, &h_dirs}};
    if (cell_ == Cell::kLstm) states.push_back({2, &c_dirs});
    for (const auto& [i, dirs] : states) {
      if (!WantsOutput(i)) continue;
      KILN_ASSIGN_OR_RETURN(Node * s, Join(*dirs, 0, absl::StrCat("state", i)));
      if (layout_ == 1) {
        KILN_ASSIGN_OR_RETURN(s, Add("transpose", {s}, TransposeAttrs{{1, 0, 2}},
                                     absl::StrCat("state", i, "_batch")));
      }
      KILN_RETURN_IF_ERROR(c_.Define(n_.output(i), s));
    }
    return absl::OkStatus();
  }

  Converter& c_;
  const onnx::NodeProto& n_;
  const Cell cell_;
  Node* x_ = nullptr;
  Node* w_ = nullptr;
  Node* r_ = nullptr;
  Node* b_ = nullptr;
  Node* lengths_ = nullptr;
  Node* h0_ = nullptr;
  Node* c0_ = nullptr;
  Node* peepholes_ = nullptr;
  int64_t layout_ = 0;
  bool reverse_only_ = false;
  int64_t directions_ = 1;
  int64_t seq_ = 0;
  int64_t batch_ = 0;
  int64_t hidden_ = 0;
  std::vector<Activation> activations_;
  std::optional<float> clip_;
};

ConvertFn Recurrent(Cell cell) {
  return
      [cell](Converter& c, const onnx::NodeProto& n) { return Recurrence(c, n, cell).Convert(); };
}

}  // namespace

void AddRecurrentConverters(ConverterMap& table) {
  table["LSTM"] = Recurrent(Cell::kLstm);
  table["GRU"] = Recurrent(Cell::kGru);
  table["RNN"] = Recurrent(Cell::kRnn);
}

}  // namespace kiln::onnx_import
