// ONNX's signal operators (opset 17): DFT and STFT, as matrix products with
// constant cosine and sine tables.
//
// Design note: a DFT of N points costs O(N K) this way, against an FFT's
// O(N log N), but the sizes models use (audio frames of a few hundred
// points, spectrogram front ends) keep the tables small, and the products run
// on the packed matmul kernels every model already compiles, fused with the
// framing and windowing around them; no new kernel kind is needed. The
// tables are capped (kMaxTableElements) so a hostile length cannot make the
// import allocate gigabytes.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/frontend/onnx_converter.h"

namespace kiln::onnx_import {
namespace {

// 2^24 elements: 64 MiB per float32 table, a 4096-point full DFT.
constexpr int64_t kMaxTableElements = int64_t{1} << 24;

std::string What(const onnx::NodeProto& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
}

// A [rows, cols] constant of `dtype` whose element (i, k) is f(i, k).
template <typename F>
Node* Table(Converter& c, const std::string& name, DType dtype, int64_t rows, int64_t cols, F f) {
  const TensorType type{dtype, {rows, cols}};
  std::string bytes(type.ByteSize(), '\0');
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < cols; ++k)
      WriteElementFromDouble(dtype, bytes.data(), i * cols + k, f(i, k));
  }
  return c.Constant(name, type, bytes.data());
}

// The DFT of x [..., N (at `axis`), ..., C] (C = 1: real, 2: complex) along
// `axis`, over `length` points (the signal cut or zero-padded to it), as
// ONNX defines it: [..., K (at `axis`), ..., 2], K = length, or length / 2
// + 1 when `onesided`; the inverse scales by 1 / length.
//
// With e^(-+i t) = cos t -+ i sin t, a + ib transforms to
//   forward: re = a cos + b sin,  im = b cos - a sin
//   inverse: re = a cos - b sin,  im = b cos + a sin   (then / length)
// so each output part is one or two products with [N, K] tables whose rows
// at or past `length` are zero (the cut) and whose phases use `length` (the
// padding).
absl::StatusOr<Node*> Dft(Converter& c, const onnx::NodeProto& n, Node* x, int64_t axis,
                          int64_t length, bool inverse, bool onesided) {
  const int64_t rank = x->type.rank();
  const std::vector<int64_t>& shape = x->type.shape;
  if (rank < 2 || (shape[rank - 1] != 1 && shape[rank - 1] != 2) || !IsFloatDType(x->type.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n), ": wants a float signal [..., 1] (real) or [..., 2] (complex), got ",
                     x->type.ToString()));
  }
  if (axis < 0 || axis >= rank - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n), ": axis ", axis, " is not a signal dim of ", x->type.ToString()));
  }
  if (length < 1) {
    return absl::InvalidArgumentError(absl::StrCat(What(n), ": dft_length ", length, " < 1"));
  }
  const int64_t points = shape[axis];
  const int64_t bins = onesided ? length / 2 + 1 : length;
  if (points > kMaxTableElements / bins) {
    return absl::UnimplementedError(absl::StrCat(What(n), ": a ", points, " x ", bins,
                                                 " DFT table is over Kiln's ", kMaxTableElements,
                                                 " elements"));
  }
  const DType dtype = x->type.dtype;
  const bool complex = shape[rank - 1] == 2;

  // The real and imaginary parts, the signal dim moved last.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d) {
    if (d != axis) perm.push_back(d);
  }
  perm.push_back(axis);
  const bool moved = axis != rank - 2;
  auto part = [&](int64_t which) -> absl::StatusOr<Node*> {
    const int64_t index = which;
    Node* at = c.Constant(n.name() + (which ? "/imag_at" : "/real_at"),
                          TensorType{DType::kInt64, {}}, &index);
    KILN_ASSIGN_OR_RETURN(
        Node * p, c.Add(n, "gather", {x, at}, AxisAttrs{rank - 1}, which ? "/imag" : "/real"));
    if (!moved) return p;
    return c.Add(n, "transpose", {p}, TransposeAttrs{perm}, which ? "/imag_last" : "/real_last");
  };
  KILN_ASSIGN_OR_RETURN(Node* a, part(0));
  Node* b = nullptr;
  if (complex) {
    KILN_ASSIGN_OR_RETURN(b, part(1));
  }

  const double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  const int64_t used = std::min(points, length);
  auto phase = [length](int64_t i, int64_t k) {
    // (i k) mod length first: exact in integers, so large i k lose no phase.
    return 2 * M_PI * static_cast<double>((i * k) % length) / static_cast<double>(length);
  };
  Node* cosines = Table(c, n.name() + "/cos", dtype, points, bins, [&](int64_t i, int64_t k) {
    return i < used ? scale * std::cos(phase(i, k)) : 0.0;
  });
  // sin(t) where the part's formula adds it, -sin(t) where it subtracts.
  auto sines = [&](const std::string& name, double sign) {
    return Table(c, n.name() + name, dtype, points, bins, [&](int64_t i, int64_t k) {
      return i < used ? sign * scale * std::sin(phase(i, k)) : 0.0;
    });
  };
  const double forward = inverse ? 1.0 : -1.0;  // the sign of a's term in im
  KILN_ASSIGN_OR_RETURN(Node* re, c.Add(n, "matmul", {a, cosines}, NoAttrs{}, "/re_a"));
  KILN_ASSIGN_OR_RETURN(Node* im,
                        c.Add(n, "matmul", {a, sines("/sin_im", forward)}, NoAttrs{}, "/im_a"));
  if (b != nullptr) {
    KILN_ASSIGN_OR_RETURN(Node* re_b,
                          c.Add(n, "matmul", {b, sines("/sin_re", -forward)}, NoAttrs{}, "/re_b"));
    KILN_ASSIGN_OR_RETURN(Node* im_b, c.Add(n, "matmul", {b, cosines}, NoAttrs{}, "/im_b"));
    KILN_ASSIGN_OR_RETURN(re, c.Add(n, "add", {re, re_b}, NoAttrs{}, "/re"));
    KILN_ASSIGN_OR_RETURN(im, c.Add(n, "add", {im, im_b}, NoAttrs{}, "/im"));
  }

  // [..., K] twice -> [..., K, 2], then the bins back at `axis`.
  std::vector<int64_t> pair_shape = re->type.shape;
  pair_shape.push_back(1);
  KILN_ASSIGN_OR_RETURN(re, c.Add(n, "reshape", {re}, ReshapeAttrs{pair_shape}, "/re_pair"));
  KILN_ASSIGN_OR_RETURN(im, c.Add(n, "reshape", {im}, ReshapeAttrs{pair_shape}, "/im_pair"));
  KILN_ASSIGN_OR_RETURN(Node* y,
                        c.Add(n, "concat", {re, im}, AxisAttrs{rank - 1}, moved ? "/pairs" : ""));
  if (!moved) return y;
  std::vector<int64_t> back(rank);
  for (int64_t d = 0; d < rank - 1; ++d) back[perm[d]] = d;
  back[rank - 1] = rank - 1;
  return c.Add(n, "transpose", {y}, TransposeAttrs{back});
}

// DFT (opset 17): attributes axis (default 1), inverse, onesided; the
// optional dft_length input (a constant, or an integer model input: then
// each value compiles its own variant).
absl::Status ConvertDft(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* x, c.Value(n, 0));
  const int64_t rank = x->type.rank();
  int64_t axis = IntAttr(n, "axis", 1);
  if (axis < 0) axis += rank;
  const bool inverse = IntAttr(n, "inverse", 0) != 0;
  const bool onesided = IntAttr(n, "onesided", 0) != 0;
  if (inverse && onesided) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n), ": onesided output is for the forward transform only"));
  }
  if (axis < 0 || axis >= rank - 1) {
    return absl::InvalidArgumentError(absl::StrCat(What(n), ": axis ", IntAttr(n, "axis", 1),
                                                   " is not a signal dim of ", x->type.ToString()));
  }
  int64_t length = x->type.shape[axis];
  if (c.HasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> given, c.ConstantInts(n, 1));
    if (given.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": dft_length must be a scalar"));
    }
    length = given[0];
  }
  KILN_ASSIGN_OR_RETURN(Node* y, Dft(c, n, x, axis, length, inverse, onesided));
  return c.Define(n.output(0), y);
}

// STFT (opset 17): signal [batch, length, 1 or 2], frame_step, an optional
// window [frame_length] and an optional frame_length; attribute onesided
// (default 1). Frames are gathered by a constant index table [frames,
// frame_length], windowed, and transformed along their samples: [batch,
// frames, bins, 2].
absl::Status ConvertStft(Converter& c, const onnx::NodeProto& n) {
  KILN_ASSIGN_OR_RETURN(Node* signal, c.Value(n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> step, c.ConstantInts(n, 1));
  KILN_ASSIGN_OR_RETURN(Node* window, OptionalValue(c, n, 2));
  int64_t frame_length = -1;
  if (c.HasInput(n, 3)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> given, c.ConstantInts(n, 3));
    if (given.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": frame_length must be a scalar"));
    }
    frame_length = given[0];
  }
  if (window != nullptr) {
    if (window->type.rank() != 1 || (frame_length >= 0 && window->type.shape[0] != frame_length)) {
      return absl::InvalidArgumentError(absl::StrCat(What(n), ": window ", window->type.ToString(),
                                                     " does not match frame_length ",
                                                     frame_length));
    }
    frame_length = window->type.shape[0];
  }
  const std::vector<int64_t>& shape = signal->type.shape;
  if (signal->type.rank() != 3 || step.size() != 1 || step[0] < 1 || frame_length < 1 ||
      frame_length > shape[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(n),
                     ": wants signal [batch, length, 1 or 2], a frame_step >= 1 and a window or "
                     "frame_length in [1, length]; got ",
                     signal->type.ToString(), ", step ", step.empty() ? 0 : step[0],
                     ", frame length ", frame_length));
  }
  const int64_t frames = (shape[1] - frame_length) / step[0] + 1;
  if (frames > kMaxTableElements / frame_length) {
    return absl::UnimplementedError(
        absl::StrCat(What(n), ": ", frames, " frames of ", frame_length, " samples are too many"));
  }
  std::vector<int64_t> positions(frames * frame_length);
  for (int64_t f = 0; f < frames; ++f) {
    std::iota(positions.begin() + f * frame_length, positions.begin() + (f + 1) * frame_length,
              f * step[0]);
  }
  Node* index = c.Constant(n.name() + "/frame_positions",
                           TensorType{DType::kInt64, {frames, frame_length}}, positions.data());
  KILN_ASSIGN_OR_RETURN(Node* framed,
                        c.Add(n, "gather", {signal, index}, AxisAttrs{1}, "/frames"));
  if (window != nullptr) {
    KILN_ASSIGN_OR_RETURN(
        Node * column, c.Add(n, "reshape", {window}, ReshapeAttrs{{frame_length, 1}}, "/window"));
    KILN_ASSIGN_OR_RETURN(framed, c.Add(n, "mul", {framed, column}, NoAttrs{}, "/windowed"));
  }
  KILN_ASSIGN_OR_RETURN(Node* y, Dft(c, n, framed, 2, frame_length, /*inverse=*/false,
                                      IntAttr(n, "onesided", 1) != 0));
  return c.Define(n.output(0), y);
}

}  // namespace

void AddSignalConverters(ConverterMap& table) {
  table["DFT"] = ConvertDft;
  table["STFT"] = ConvertStft;
}

}  // namespace kiln::onnx_import
