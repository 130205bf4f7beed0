// Plain-loop reference implementations, written apart from the compiler, for
// checking generated kernels numerically. Row-major float tensors.
#ifndef KILN_TESTS_TEST_UTIL_REFERENCE_OPS_H_
#define KILN_TESTS_TEST_UTIL_REFERENCE_OPS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::testing {

// y[m, n] = sum_k x[m, k] * w[n, k] + b[n]
inline std::vector<float> RefDense(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int64_t m, int64_t k,
                                   int64_t n) {
  std::vector<float> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = b.empty() ? 0.0 : b[j];
      for (int64_t q = 0; q < k; ++q) acc += double(x[i * k + q]) * w[j * k + q];
      y[i * n + j] = static_cast<float>(acc);
    }
  }
  return y;
}

inline std::vector<float> RefRelu(std::vector<float> x) {
  for (float& v : x) v = std::max(v, 0.0f);
  return x;
}

inline std::vector<float> RefSoftmaxRows(const std::vector<float>& x, int64_t rows,
                                         int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max<double>(mx, x[i * cols + j]);
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[i * cols + j] - mx);
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = std::exp(x[i * cols + j] - mx) / sum;
  }
  return y;
}

// NCHW x OIHW with stride and symmetric zero padding, optional bias.
inline std::vector<float> RefConv2DStrided(const std::vector<float>& x,
                                           const std::vector<float>& w,
                                           const std::vector<float>& b, int64_t n, int64_t c,
                                           int64_t h, int64_t wd, int64_t o, int64_t kh,
                                           int64_t kw, int64_t stride, int64_t pad) {
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (wd + 2 * pad - kw) / stride + 1;
  std::vector<float> y(n * o * oh * ow);
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oi = 0; oi < o; ++oi)
      for (int64_t yi = 0; yi < oh; ++yi)
        for (int64_t xi = 0; xi < ow; ++xi) {
          double acc = b.empty() ? 0.0 : b[oi];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = yi * stride + ky - pad, ix = xi * stride + kx - pad;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += double(x[((ni * c + ci) * h + iy) * wd + ix]) *
                       w[((oi * c + ci) * kh + ky) * kw + kx];
              }
          y[((ni * o + oi) * oh + yi) * ow + xi] = static_cast<float>(acc);
        }
  return y;
}

// NCHW x OIHW, stride 1, no padding, optional bias.
inline std::vector<float> RefConv2D(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& b, int64_t n, int64_t c,
                                    int64_t h, int64_t wd, int64_t o, int64_t kh, int64_t kw) {
  return RefConv2DStrided(x, w, b, n, c, h, wd, o, kh, kw, /*stride=*/1, /*pad=*/0);
}

// Deterministic pseudo-random values in [-1, 1).
inline std::vector<float> Pseudorandom(int64_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t s = seed * 2654435761u + 1;
  for (float& f : v) {
    s = s * 1664525u + 1013904223u;
    f = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_REFERENCE_OPS_H_
