// The contract between generated kernels and the process that runs them, in
// one place (as XLA's cpu_runtime.h and TVM's c_backend_api.h name theirs):
// codegen emits calls by these names and signatures, the JIT defines them for
// every kernel it links, and the runtime implements them. Changing anything
// here changes the machine code of every kernel: bump Kiln's version
// (common/version.h), which every cache key holds, with it.
//
// A kernel:
//   extern "C" void <name>(void** args);
// args[i] is the data pointer of buffer i of its LoopFunction for i <
// num_params (inputs first, then outputs). Temporaries come from
// kiln_workspace_alloc on entry and go back through kiln_workspace_free on
// return; buffers marked `local` live on the stack of each thread. Where
// kiln_workspace_alloc returns null (the system refused the memory), the
// kernel frees what it got and returns without running; the runtime, which
// saw the refusal, fails the call (runtime/workspace_pool.h).
// A parallel loop is outlined into a body function and run through
// kiln_parallel_for, which calls body(closure, begin, end) over disjoint
// ranges covering [0, extent) and returns when all have run.
//
// A kernel compiled with bounds checks (CodegenOptions::bounds_checks) also
// reads args[num_params]: a KernelFault its caller zeroed. A load or store
// whose index lies outside its buffer is not made; the kernel calls
// kiln_kernel_fault and returns early. Kernels without checks never read that
// slot, so callers pass one to every kernel and need not know which is which.
#ifndef KILN_COMMON_KERNEL_ABI_H_
#define KILN_COMMON_KERNEL_ABI_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kiln::abi {

using KernelFn = void (*)(void** args);
using ParallelBody = void (*)(void* closure, int64_t begin, int64_t end);

inline constexpr char kParallelFor[] = "kiln_parallel_for";
inline constexpr char kWorkspaceAlloc[] = "kiln_workspace_alloc";
inline constexpr char kWorkspaceFree[] = "kiln_workspace_free";
inline constexpr char kKernelFault[] = "kiln_kernel_fault";
inline constexpr char kPadPlanes[] = "kiln_pad_planes";
inline constexpr char kQConvU8S8[] = "kiln_qconv_u8s8";
inline constexpr char kQConvU8S8Q8[] = "kiln_qconv_u8s8_q8";
inline constexpr char kAttentionF32[] = "kiln_attention_f32";
inline constexpr char kQMatMulU8S8[] = "kiln_qmatmul_u8s8";
inline constexpr char kQMatMulU8S8I32[] = "kiln_qmatmul_u8s8_i32";
inline constexpr char kQMatMulU8S8Q8[] = "kiln_qmatmul_u8s8_q8";

// The float64 operand `requant` of the requantising kernels (*_q8) holds
// these six values: y_scale, low, high, zero, q_low, q_high.
inline constexpr int kRequantValues = 6;

// kiln_qconv_u8s8's weight rows are K = channels * kh * kw int8 values padded
// with zeros to a multiple of this (vpdpbusd sums four u8 x s8 products).
inline constexpr int kQConvKGroup = 4;

// kiln_qmatmul_u8s8's packed weight: blocks of this many output columns,
// each K rounded up to kQMatMulKGroup rows (see the function below).
inline constexpr int kQMatMulColumnBlock = 16;
inline constexpr int kQMatMulKGroup = 4;

// The first out-of-bounds access of one call. Parallel loop bodies may fault
// at once on several threads: the first to set `faulted` writes the rest.
// Checked kernels also read `faulted` (an i32 at offset 0) after a parallel
// loop, to return instead of running the loops after it.
struct KernelFault {
  std::atomic<int32_t> faulted{0};
  int32_t buffer = 0;  // the LoopFunction's buffer number: params first, then temporaries
  int32_t is_store = 0;
  int64_t index = 0;   // the flat element index the kernel tried
  int64_t num_elements = 0;  // the buffer's
};
static_assert(offsetof(KernelFault, faulted) == 0 && sizeof(std::atomic<int32_t>) == 4,
              "generated code reads KernelFault::faulted as an i32 at offset 0");

// kiln_workspace_alloc's blocks are aligned to this many bytes, and codegen
// tells LLVM so.
inline constexpr int kWorkspaceAlignment = 64;

}  // namespace kiln::abi

// Defined by the runtime (thread_pool.cc, workspace_pool.cc, kernel_fault.cc,
// pad_planes.cc, qconv_u8s8.cc, attention_f32.cc, qmatmul_u8s8.cc).
extern "C" {
void kiln_parallel_for(kiln::abi::ParallelBody body, void* closure, int64_t extent);
void* kiln_workspace_alloc(int64_t bytes);
void kiln_workspace_free(void* block);
// Records a bounds-checked kernel's out-of-range access in `fault` unless an
// earlier one is there. Returns; the kernel then returns early itself.
void kiln_kernel_fault(kiln::abi::KernelFault* fault, int32_t buffer, int64_t index,
                       int64_t num_elements, int32_t is_store);
// A conv's input made ready for the in-place read (compiler/lower/
// conv_padding.cc): `planes` consecutive h x w float planes at `src` become
// zero-padded, phase-split planes of sy * sx * hq * wq floats each at `dst`,
// whose element (py, px, yq, xq) is input (yq * sy + py - pt, xq * sx + px -
// pl), or 0 outside the input. Only rows yq in [y_begin, y_end) of each phase
// are written, so threads can split a plane's rows.
void kiln_pad_planes(float* dst, const float* src, int64_t planes, int64_t h, int64_t w,
                     int64_t sy, int64_t sx, int64_t hq, int64_t wq, int64_t pt, int64_t pl,
                     int64_t y_begin, int64_t y_end);
// A quantised 2-D conv (groups 1) in exact int32: for image b, output channel
// n and output pixel p = oy * ow + ox,
//   out[(b * co + n) * oh * ow + p] =
//       fma(float(sum_k w[n * kp + k] * xk + correction[n]), scale[n], bias[n])
// over k = (ci * kh + ky) * kw + kx < c * kh * kw, where xk is x's uint8 at
// (b, ci, oy * sy - pt + ky * dy, ox * sx - pl + kx * dx), or x_zero outside
// the input. kp is c * kh * kw rounded up to kQConvKGroup; w's padding is 0.
// With correction[n] = -x_zero * sum_k w[n * kp + k] the sum is that of
// (x - x_zero) * w, the centered integers QDQ multiplies.
void kiln_qconv_u8s8(float* out, const uint8_t* x, const int8_t* w, const int32_t* correction,
                     const float* scale, const float* bias, int64_t batch, int64_t c, int64_t h,
                     int64_t w_in, int64_t co, int64_t kh, int64_t kw, int64_t sy, int64_t sx,
                     int64_t pt, int64_t pl, int64_t dy, int64_t dx, int64_t oh, int64_t ow,
                     int64_t x_zero);
// The same sums requantised to uint8 (runtime/requantize_u8.h), with scale
// and bias in float64: for sum = the int32 sum + correction[n] above,
//   t = clamp(sum * scale[n] + bias[n], low, high)
//   out[...] = clamp(round_half_even(t / y_scale) + zero, q_low, q_high)
// all in float64, the six values read from `requant` (kRequantValues).
void kiln_qconv_u8s8_q8(uint8_t* out, const uint8_t* x, const int8_t* w,
                        const int32_t* correction, const double* scale, const double* bias,
                        const double* requant, int64_t batch, int64_t c, int64_t h, int64_t w_in,
                        int64_t co, int64_t kh, int64_t kw, int64_t sy, int64_t sx, int64_t pt,
                        int64_t pl, int64_t dy, int64_t dx, int64_t oh, int64_t ow,
                        int64_t x_zero);
// Attention over n1 * n2 entries (heads): for entry n = n_1 * n2 + n_2,
// query row i < s and column j < dv,
//   out[n_1 * o_s1 + n_2 * o_s2 + i * o_row + j] =
//       sum_t softmax_t(scale * q_i . k_t + mask[i][t]) v[t][j]
// over keys t < t_len, where row i of q is the d floats at q + n_1 * q_s1 +
// n_2 * q_s2 + i * q_row, and likewise k's and v's rows (d and dv floats)
// and the mask's (t_len floats, read only when has_mask). Input strides may
// be 0; the output's rows must not overlap.
void kiln_attention_f32(float* out, const float* q, const float* k, const float* v,
                        const float* mask, int64_t n1, int64_t n2, int64_t s, int64_t t_len,
                        int64_t d, int64_t dv, int64_t q_s1, int64_t q_s2, int64_t q_row,
                        int64_t k_s1, int64_t k_s2, int64_t k_row, int64_t v_s1, int64_t v_s2,
                        int64_t v_row, int64_t m_s1, int64_t m_s2, int64_t m_row, int64_t o_s1,
                        int64_t o_s2, int64_t o_row, int64_t has_mask, float scale);

// A quantised matrix product in exact int32: for row m < rows and column
// n < cols,
//   out[m * cols + n] =
//       fma(float(sum_k x[m * depth + k] * w(k, n) + correction[n]), scale[n], bias[n])
// over k < depth, where w(k, n) = w[((n / 16 * kq + k / 4) * 16 + n % 16) * 4 + k % 4]
// (kq = depth rounded up to kQMatMulKGroup, / 4; 16 = kQMatMulColumnBlock):
// blocks of 16 columns, each K group's 4 values of a column adjacent, zero
// past depth and cols. With correction[n] = -x_zero * sum_k w(k, n) the sum
// is that of (x - x_zero) * w. correction, scale and bias hold cols values.
void kiln_qmatmul_u8s8(float* out, const uint8_t* x, const int8_t* w, const int32_t* correction,
                       const float* scale, const float* bias, int64_t rows, int64_t depth,
                       int64_t cols);
// The same sums stored as int32: out[m * cols + n] = sum_k x * w(k, n) + correction[n].
void kiln_qmatmul_u8s8_i32(int32_t* out, const uint8_t* x, const int8_t* w,
                           const int32_t* correction, int64_t rows, int64_t depth, int64_t cols);
// The same sums requantised to uint8 as kiln_qconv_u8s8_q8 does, per column n.
void kiln_qmatmul_u8s8_q8(uint8_t* out, const uint8_t* x, const int8_t* w,
                          const int32_t* correction, const double* scale, const double* bias,
                          const double* requant, int64_t rows, int64_t depth, int64_t cols);
}

#endif  // KILN_COMMON_KERNEL_ABI_H_
