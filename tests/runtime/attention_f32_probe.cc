// Runs kiln_attention_f32 on one case written by attention_f32_test.py:
//   attention_f32_probe IN OUT THREADS
// IN: 22 int64 (n1, n2, s, t, d, dv, q_s1, q_s2, q_row, k_s1, k_s2, k_row,
// v_s1, v_s2, v_row, m_s1, m_s2, m_row, o_s1, o_s2, o_row, has_mask), the
// float32 scale, then five int64 element counts: of the float32 buffers q,
// k, v and mask that follow (the kernel reads each through its strides)
// and of the output buffer; OUT: that buffer (zeros where the kernel wrote
// nothing), raw. THREADS: the kernel pool's size (work items split across
// threads must give the same values).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/kernel_abi.h"
#include "runtime/thread_pool.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: attention_f32_probe IN OUT THREADS\n");
    return 2;
  }
  kiln::runtime::SetParallelThreads(std::atoi(argv[3]));
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  int64_t v[22];
  float scale = 0;
  int64_t counts[5];
  const size_t header = sizeof(v) + sizeof(scale) + sizeof(counts);
  if (bytes.size() < header) return 2;
  std::memcpy(v, bytes.data(), sizeof(v));
  std::memcpy(&scale, bytes.data() + sizeof(v), sizeof(scale));
  std::memcpy(counts, bytes.data() + sizeof(v) + sizeof(scale), sizeof(counts));
  std::vector<std::vector<float>> buffers(4);
  size_t at = header;
  for (int i = 0; i < 4; ++i) {
    buffers[i].resize(counts[i] + 1);  // never empty: data() is a valid pointer
    const size_t n = counts[i] * sizeof(float);
    if (at + n > bytes.size()) return 2;
    std::memcpy(buffers[i].data(), bytes.data() + at, n);
    at += n;
  }
  if (at != bytes.size()) {
    std::fprintf(stderr, "input is %zu bytes, expected %zu\n", bytes.size(), at);
    return 2;
  }
  std::vector<float> out(counts[4]);
  kiln_attention_f32(out.data(), buffers[0].data(), buffers[1].data(), buffers[2].data(),
                     buffers[3].data(), v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                     v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[17], v[18], v[19], v[20],
                     v[21], scale);
  std::ofstream(argv[2], std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  return 0;
}
