// The backward of scaled_residual on channels_last tensors in one pass over grad and branch: the
// branch's gradient grad * scale (in the branch's dtype), the scale's gradient, the sum of
// grad * (branch + bias) per channel (and image, for a per-image scale), and the bias's, the sum of
// grad * scale per channel, summed in a fixed order.
#pragma once

#include <cstdint>

#include "../common/common.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kResidualBwdThreads = 256;
constexpr int kResidualMaxChannels = 4096;  // the per-thread sums of V channels' packs cover this many

// Block (chunk, n): rows [chunk * rows_per_chunk, ...) of image n's HW rows of C channels (P = C / V
// packs of V channels a row). With P <= the block's threads, thread t takes pack t mod P of every
// (threads / P)-th row from row t / P; otherwise one row at a time, packs t, t + threads, ... Each
// thread sums grad * branch of its packs over its rows in row order; the threads of one pack add
// their sums in row-offset order; the block writes partial[n][chunk][c]. grad_branch: null when
// not asked for. With BIAS, bias (C floats) is added to the branch, and the sums of grad * scale go to
// partial_bias likewise.
template <typename g_t, typename b_t, int V, bool BIAS>
__global__ void __launch_bounds__(kResidualBwdThreads)
    residual_backward_cl_kernel(const g_t* __restrict__ grad, const b_t* __restrict__ branch,
                                const float* __restrict__ scale, const float* __restrict__ bias,
                                b_t* __restrict__ grad_branch, float* __restrict__ partial,
                                float* __restrict__ partial_bias, int C, int HW, int rows_per_chunk, int scale_n) {
  constexpr int kMaxPacks = kResidualMaxChannels / (kResidualBwdThreads * V);
  __shared__ float red[kResidualBwdThreads * V];
  const int n = blockIdx.y, chunk = blockIdx.x, chunks = gridDim.x, t = threadIdx.x;
  const int P = C / V;
  const bool wide = P > kResidualBwdThreads;
  const int in_flight = wide ? 1 : kResidualBwdThreads / P;  // rows at a time
  const int lane_row = wide ? 0 : t / P, pack0 = wide ? t : t % P;
  const bool active = wide || t < in_flight * P;
  const float* sc = scale + int64_t(n) * scale_n;
  const int r0 = chunk * rows_per_chunk, r1 = min(HW, r0 + rows_per_chunk);
  float acc[kMaxPacks][V], acc_bias[BIAS ? kMaxPacks : 1][V];
#pragma unroll
  for (int j = 0; j < kMaxPacks; ++j) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      acc[j][k] = 0.0f;
      if constexpr (BIAS) acc_bias[j][k] = 0.0f;
    }
  }
  if (active) {
    for (int r = r0 + lane_row; r < r1; r += in_flight) {
      const int64_t row = (int64_t(n) * HW + r) * P;
#pragma unroll
      for (int j = 0; j < kMaxPacks; ++j) {
        const int p = pack0 + j * kResidualBwdThreads;
        if (p >= P || (!wide && j > 0)) break;
        const Pack<g_t, V> g = reinterpret_cast<const Pack<g_t, V>*>(grad)[row + p];
        const Pack<b_t, V> b = reinterpret_cast<const Pack<b_t, V>*>(branch)[row + p];
        Pack<b_t, V> o;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float gv = static_cast<float>(g.v[k]);
          const float dv = gv * sc[p * V + k];
          o.v[k] = static_cast<b_t>(dv);
          if constexpr (BIAS) {
            acc[j][k] = fmaf(gv, static_cast<float>(b.v[k]) + bias[p * V + k], acc[j][k]);
            acc_bias[j][k] += dv;
          } else {
            acc[j][k] = fmaf(gv, static_cast<float>(b.v[k]), acc[j][k]);
          }
        }
        if (grad_branch != nullptr) reinterpret_cast<Pack<b_t, V>*>(grad_branch)[row + p] = o;
      }
    }
  }
  const int64_t offset = (int64_t(n) * chunks + chunk) * C;
  if (wide) {
#pragma unroll
    for (int j = 0; j < kMaxPacks; ++j) {
      const int p = pack0 + j * kResidualBwdThreads;
      if (p < P) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          partial[offset + p * V + k] = acc[j][k];
          if constexpr (BIAS) partial_bias[offset + p * V + k] = acc_bias[j][k];
        }
      }
    }
    return;
  }
  // The threads of one pack add their sums in row-offset order, through shared memory (once for the
  // scale's sums, once more for the bias's).
  for (int pass = 0; pass < (BIAS ? 2 : 1); ++pass) {
    if (pass > 0) __syncthreads();
    if (active) {
#pragma unroll
      for (int k = 0; k < V; ++k) red[lane_row * C + pack0 * V + k] = pass == 0 ? acc[0][k] : acc_bias[0][k];
    }
    __syncthreads();
    float* out = (pass == 0 ? partial : partial_bias) + offset;
    for (int c = t; c < C; c += kResidualBwdThreads) {
      float s = 0.0f;
      for (int q = 0; q < in_flight; ++q) s += red[q * C + c];
      out[c] = s;
    }
  }
}

// grad_scale[m][c] = the sum of partial[n][chunk][c] over the chunks of the images of m (image m
// alone, or every image when the scale has none: groups = N, images = 1 per group otherwise): a warp
// per output, its lanes over the entries in a fixed stride, then a fixed shuffle tree.
__global__ void __launch_bounds__(kResidualBwdThreads)
    residual_scale_sum_kernel(const float* __restrict__ partial, float* __restrict__ grad_scale, int outputs, int C,
                              int chunks, int images_per_output) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (warp >= outputs) return;
  const int m = warp / C, c = warp - m * C;
  const int entries = images_per_output * chunks;
  float s = 0.0f;
  for (int e = lane; e < entries; e += 32) {
    const int n = m * images_per_output + e / chunks, chunk = e % chunks;
    s += partial[(int64_t(n) * chunks + chunk) * C + c];
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (lane == 0) grad_scale[warp] = s;
}

}  // namespace cuda
}  // namespace mmo1d
