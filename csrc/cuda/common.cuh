// Helpers shared by every CUDA source of mmo1d: launch-error checks, integer helpers and warp
// reductions.
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace mmo1d {
namespace cuda {

#define MMO1D_CUDA_CHECK(expr)                                                                            \
  do {                                                                                                    \
    const cudaError_t err__ = (expr);                                                                     \
    TORCH_CHECK(err__ == cudaSuccess, "mmo1d CUDA error: ", cudaGetErrorString(err__), " (", #expr, ")"); \
  } while (0)

inline int ceil_div(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}
__host__ __device__ constexpr size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Maximum over the 32 lanes of a warp (all lanes must call it).
__device__ __forceinline__ int warp_max(int v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

// Exact a / d for 0 <= a < 2^22 through a float reciprocal and one correction step (an integer
// division by a run-time value costs ~20 instructions; this is on every staged element).
struct FastDiv {
  int d;
  float inv;
  __device__ explicit FastDiv(int divisor) : d(divisor), inv(1.0f / static_cast<float>(divisor)) {}
  __device__ __forceinline__ int operator()(int a, int* rem) const {
    int q = static_cast<int>(static_cast<float>(a) * inv);
    int r = a - q * d;
    if (r < 0) {
      --q;
      r += d;
    } else if (r >= d) {
      ++q;
      r -= d;
    }
    *rem = r;
    return q;
  }
};

}  // namespace cuda
}  // namespace mmo1d
