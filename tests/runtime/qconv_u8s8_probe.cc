// Runs kiln_qconv_u8s8 on one case written by qconv_u8s8_test.py:
//   qconv_u8s8_probe IN OUT [--q8]
// IN: 16 int64 (batch, c, h, w, co, kh, kw, sy, sx, pt, pl, dy, dx, oh, ow,
// x_zero), then x (uint8), w (int8, rows padded to kQConvKGroup), correction
// (int32, co), scale and bias (float32, co each); OUT: the float32 output, raw.
// With --q8 (kiln_qconv_u8s8_q8) scale and bias are float64, the six requant
// values (float64) follow, and OUT holds the uint8 output.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/kernel_abi.h"

int main(int argc, char** argv) {
  const bool q8 = argc == 4 && std::string(argv[3]) == "--q8";
  if (argc != 3 && !q8) {
    std::fprintf(stderr, "usage: qconv_u8s8_probe IN OUT [--q8]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  int64_t v[16];
  if (bytes.size() < sizeof(v)) return 2;
  std::copy(bytes.data(), bytes.data() + sizeof(v), reinterpret_cast<char*>(v));
  const int64_t batch = v[0], c = v[1], h = v[2], w = v[3], co = v[4], kh = v[5], kw = v[6];
  const int64_t oh = v[13], ow = v[14];
  const int64_t k = c * kh * kw;
  const int64_t kp =
      (k + kiln::abi::kQConvKGroup - 1) / kiln::abi::kQConvKGroup * kiln::abi::kQConvKGroup;
  const char* at = bytes.data() + sizeof(v);
  const auto* x = reinterpret_cast<const uint8_t*>(at);
  at += batch * c * h * w;
  const auto* weights = reinterpret_cast<const int8_t*>(at);
  at += co * kp;
  std::vector<int32_t> correction(co);
  std::copy(at, at + co * 4, reinterpret_cast<char*>(correction.data()));
  at += co * 4;
  std::vector<float> scale(co), bias(co);
  std::vector<double> scale64(co), bias64(co), requant(kiln::abi::kRequantValues);
  if (q8) {
    for (std::vector<double>* d : {&scale64, &bias64, &requant}) {
      std::copy(at, at + d->size() * 8, reinterpret_cast<char*>(d->data()));
      at += d->size() * 8;
    }
  } else {
    std::copy(at, at + co * 4, reinterpret_cast<char*>(scale.data()));
    at += co * 4;
    std::copy(at, at + co * 4, reinterpret_cast<char*>(bias.data()));
    at += co * 4;
  }
  if (at != bytes.data() + bytes.size()) {
    std::fprintf(stderr, "input is %zu bytes, expected %td\n", bytes.size(), at - bytes.data());
    return 2;
  }
  if (q8) {
    std::vector<uint8_t> out(batch * co * oh * ow);
    kiln_qconv_u8s8_q8(out.data(), x, weights, correction.data(), scale64.data(), bias64.data(),
                       requant.data(), batch, c, h, w, co, kh, kw, v[7], v[8], v[9], v[10], v[11],
                       v[12], oh, ow, v[15]);
    std::ofstream(argv[2], std::ios::binary)
        .write(reinterpret_cast<const char*>(out.data()), out.size());
    return 0;
  }
  std::vector<float> out(batch * co * oh * ow);
  kiln_qconv_u8s8(out.data(), x, weights, correction.data(), scale.data(), bias.data(), batch, c, h,
                  w, co, kh, kw, v[7], v[8], v[9], v[10], v[11], v[12], oh, ow, v[15]);
  std::ofstream(argv[2], std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  return 0;
}
