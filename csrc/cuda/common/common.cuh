// Helpers shared by every CUDA source of mmo1d: launch-error checks, integer helpers and, for the
// kernels, warp reductions.
#pragma once

#include <ATen/core/Tensor.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace mmo1d {
namespace cuda {

#define MMO1D_CUDA_CHECK(expr)                                                                            \
  do {                                                                                                    \
    const cudaError_t err__ = (expr);                                                                     \
    TORCH_CHECK(err__ == cudaSuccess, "mmo1d CUDA error: ", cudaGetErrorString(err__), " (", #expr, ")"); \
  } while (0)

// The tensors of a gather kernel: out = the gather of src, plus bias (C values) when not null.
template <typename scalar_t>
struct GatherIO {
  const scalar_t* src;
  scalar_t* out;
  const scalar_t* bias;
};

// Whether t's data pointer is a multiple of `bytes` (an undefined tensor counts as aligned): the
// condition of the vector accesses of every host-side launcher.
inline bool aligned_to(const at::Tensor& t, int64_t bytes) {
  return !t.defined() || reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes == 0;
}
inline bool aligned16(const at::Tensor& t) {
  return aligned_to(t, 16);
}

// V values of T moved in one vector access (sizeof(T) * V bytes, aligned to that): the packs of the
// element-wise kernels (layer norm, residual, GELU).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// f(T{}) with T the storage type of a float32, float16 or bfloat16 tensor (the element-wise kernels'
// dtypes); an error naming `what` for any other.
template <typename F>
void dispatch_float_half_bf16(at::ScalarType t, const char* what, F&& f) {
  switch (t) {
    case at::kFloat:
      return f(float{});
    case at::kHalf:
      return f(c10::Half{});
    case at::kBFloat16:
      return f(c10::BFloat16{});
    default:
      TORCH_CHECK(false, what, ": unsupported dtype ", t);
  }
}

inline int ceil_div(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}
__host__ __device__ constexpr size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}

// The kernels' side (nvcc only: the C++ sources of the CUDA build, such as the dispatcher, include
// this header for the host helpers above).
#if defined(__CUDACC__)

// The sum over each group of G consecutive lanes of a warp (G a power of two up to 32; all 32 lanes
// call it), a butterfly in a fixed order: every lane of a group gets its group's sum.
template <typename T>
__device__ __forceinline__ T group_sum(T v, int G) {
  for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum over the 32 lanes of a warp.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  return group_sum(v, 32);
}

// The sum over the lanes of a warp that hold the same place in its groups of G lanes (lane % G;
// all 32 lanes call it): every lane gets its place's sum.
template <typename T>
__device__ __forceinline__ T across_groups_sum(T v, int G) {
  for (int o = G; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of v over this lane and the lanes before it (all 32 lanes call it).
__device__ __forceinline__ int warp_inclusive_sum(int v) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) >= d) v += u;
  }
  return v;
}

// Maximum over the 32 lanes of a warp (all lanes must call it).
__device__ __forceinline__ int warp_max(int v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

// Warp 0 of a block over the channels [c0, c0 + CB) (CB <= 32) of the angle tables: their largest
// point count and halo, into *s_np, *s_ph and *s_pw (read them after a __syncthreads()).
__device__ __forceinline__ void block_extent(const int* __restrict__ npts, const int2* __restrict__ halo, int c0,
                                             int CB, int C, int* s_np, int* s_ph, int* s_pw) {
  if (threadIdx.x >= 32) return;
  int np = 0, ph = 0, pw = 0;
  const int c = c0 + static_cast<int>(threadIdx.x);
  if (static_cast<int>(threadIdx.x) < CB && c < C) {
    np = npts[c];
    const int2 hl = halo[c];
    ph = hl.x;
    pw = hl.y;
  }
  np = warp_max(np);
  ph = warp_max(ph);
  pw = warp_max(pw);
  if (threadIdx.x == 0) {
    *s_np = np;
    *s_ph = ph;
    *s_pw = pw;
  }
}

// Exact a / d for 0 <= a < 2^22 through a float reciprocal and one correction step (an integer
// division by a run-time value costs ~20 instructions; this is on every staged element).
struct FastDiv {
  struct QuotRem {
    int quot, rem;
  };
  int d;
  float inv;
  __device__ explicit FastDiv(int divisor) : d(divisor), inv(1.0f / static_cast<float>(divisor)) {}
  __device__ __forceinline__ QuotRem divmod(int a) const {
    int q = static_cast<int>(static_cast<float>(a) * inv);
    int r = a - q * d;
    if (r < 0) {
      --q;
      r += d;
    } else if (r >= d) {
      ++q;
      r -= d;
    }
    return QuotRem{q, r};
  }
};

#endif  // defined(__CUDACC__)

}  // namespace cuda
}  // namespace mmo1d
