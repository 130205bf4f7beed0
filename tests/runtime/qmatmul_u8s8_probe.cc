// Runs kiln_qmatmul_u8s8 on one case written by qmatmul_u8s8_test.py:
//   qmatmul_u8s8_probe IN OUT [REPEATS]
// IN: 4 int64 (rows, depth, cols, output: 0 float32, 1 int32, 2 uint8), then
// x (uint8, rows x depth), the packed weight (int8, see common/kernel_abi.h),
// correction (int32, cols), and for float32 output scale and bias (float32,
// cols each), for uint8 output scale and bias (float64, cols each) and the
// six requant values (float64); OUT: the output (kiln_qmatmul_u8s8's
// float32, kiln_qmatmul_u8s8_i32's int32 or kiln_qmatmul_u8s8_q8's uint8), raw. With REPEATS the call is timed that many times and the best
// time printed (a measurement aid).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/kernel_abi.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: qmatmul_u8s8_probe IN OUT [REPEATS]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  int64_t v[4];
  if (bytes.size() < sizeof(v)) return 2;
  std::copy(bytes.data(), bytes.data() + sizeof(v), reinterpret_cast<char*>(v));
  const int64_t rows = v[0], depth = v[1], cols = v[2];
  const bool int32_out = v[3] == 1, uint8_out = v[3] == 2;
  constexpr int64_t kGroup = kiln::abi::kQMatMulKGroup, kBlock = kiln::abi::kQMatMulColumnBlock;
  const int64_t packed =
      (cols + kBlock - 1) / kBlock * kBlock * ((depth + kGroup - 1) / kGroup) * kGroup;
  const char* at = bytes.data() + sizeof(v);
  // Copied so that a read past the end of x, which may lie at a page's end
  // in a real tensor, shows under sanitizers.
  std::vector<uint8_t> x(at, at + rows * depth);
  at += rows * depth;
  const auto* weights = reinterpret_cast<const int8_t*>(at);
  at += packed;
  std::vector<int32_t> correction(cols);
  std::copy(at, at + cols * 4, reinterpret_cast<char*>(correction.data()));
  at += cols * 4;
  std::vector<float> scale(cols), bias(cols);
  std::vector<double> scale64(cols), bias64(cols), requant(kiln::abi::kRequantValues);
  if (uint8_out) {
    for (std::vector<double>* d : {&scale64, &bias64, &requant}) {
      std::copy(at, at + d->size() * 8, reinterpret_cast<char*>(d->data()));
      at += d->size() * 8;
    }
  } else if (!int32_out) {
    std::copy(at, at + cols * 4, reinterpret_cast<char*>(scale.data()));
    at += cols * 4;
    std::copy(at, at + cols * 4, reinterpret_cast<char*>(bias.data()));
    at += cols * 4;
  }
  if (at != bytes.data() + bytes.size()) {
    std::fprintf(stderr, "input is %zu bytes, expected %td\n", bytes.size(), at - bytes.data());
    return 2;
  }
  std::vector<float> out(rows * cols);  // or int32s, of the same size
  const int repeats = argc == 4 ? std::atoi(argv[3]) : 1;
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (uint8_out) {
      kiln_qmatmul_u8s8_q8(reinterpret_cast<uint8_t*>(out.data()), x.data(), weights,
                           correction.data(), scale64.data(), bias64.data(), requant.data(), rows,
                           depth, cols);
    } else if (int32_out) {
      kiln_qmatmul_u8s8_i32(reinterpret_cast<int32_t*>(out.data()), x.data(), weights,
                            correction.data(), rows, depth, cols);
    } else {
      kiln_qmatmul_u8s8(out.data(), x.data(), weights, correction.data(), scale.data(),
                        bias.data(), rows, depth, cols);
    }
    best = std::min(
        best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count());
  }
  if (argc == 4) {
    std::printf("%.4f ms, %.1f int8 GMAC/s\n", best,
                static_cast<double>(rows * depth * cols) / best * 1e-6);
  }
  std::ofstream(argv[2], std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()),
             out.size() * (uint8_out ? sizeof(uint8_t) : sizeof(float)));
  return 0;
}
