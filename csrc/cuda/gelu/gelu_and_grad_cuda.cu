// CUDA kernels of mmo1d::gelu_and_grad (gelu_and_grad.h).
// - Without a bias: h = gelu(pre) and dpre = gelu_backward(grad, pre) in one pass over pre and grad in
//   memory order, 16 bytes of each tensor a thread at a time where the pointers allow it.
// - With a bias (channels_last rows of C channels): x = pre + bias in float32, h = gelu(x) and, given
//   grad, dpre and the bias's gradient. Thread (tx, ty) of block (bx, by) takes pack tx of column chunk
//   bx in rows by * BY + ty + k * gridDim.y * BY, two at a time (its channels fixed, so it sums its dpre
//   in registers);
//   the block adds its BY rows of threads in order, a second kernel the row blocks in a fixed order: the
//   sum is deterministic, at most (rows per thread + BY + gridDim.y / 16 + 16) additions deep.
// Each element's arithmetic is ATen's exact GELU and its gradient (ActivationGeluKernel.cu,
// GeluType::None) written as ATen writes them, so that nvcc compiles the same operations (its FMA
// contraction included): the values of at::gelu and at::gelu_backward at the same float32 x.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAMathCompat.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>

#include "../../common.h"
#include "../../gelu_and_grad.h"
#include "../common/common.cuh"

namespace mmo1d {
namespace {

constexpr int kGeluThreads = 256;

using cuda::Pack;

__device__ __forceinline__ float gelu_element(float x) {
  constexpr float kAlpha = M_SQRT1_2;
  return x * float(0.5) * (float(1) + ::erf(x * kAlpha));
}

// dy * gelu'(x).
__device__ __forceinline__ float gelu_grad_element(float x, float dy) {
  constexpr float kAlpha = M_SQRT1_2;
  constexpr float kBeta = M_2_SQRTPI * M_SQRT1_2 * float(0.5);
  const float cdf = float(0.5) * (float(1) + ::erf(x * kAlpha));
  const float pdf = c10::cuda::compat::exp(float(-0.5) * x * x) * kBeta;
  return dy * (cdf + x * pdf);
}

// Packs of V elements from pack 0 to packs - 1 (grid-stride).
template <typename T, int V>
__global__ void __launch_bounds__(kGeluThreads) gelu_and_grad_kernel(const T* __restrict__ pre,
                                                                     const T* __restrict__ grad, T* __restrict__ h,
                                                                     T* __restrict__ dpre, uint32_t packs) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const Pack<T, V> x = reinterpret_cast<const Pack<T, V>*>(pre)[i];
    const Pack<T, V> g = reinterpret_cast<const Pack<T, V>*>(grad)[i];
    Pack<T, V> ho, go;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xf = static_cast<float>(x.v[k]);
      ho.v[k] = static_cast<T>(gelu_element(xf));
      go.v[k] = static_cast<T>(gelu_grad_element(xf, static_cast<float>(g.v[k])));
    }
    reinterpret_cast<Pack<T, V>*>(h)[i] = ho;
    reinterpret_cast<Pack<T, V>*>(dpre)[i] = go;
  }
}

template <typename T>
struct BiasRows {
  const T* pre;
  const T* grad;  // null without a gradient
  const float* bias;
  T* h;
  T* dpre;
  float* partial;  // (gridDim.y, channels): each row block's sums of dpre
  int64_t rows;
  int packs;  // per row
  int channels;
};

template <typename T, int V, bool GRAD>
__global__ void __launch_bounds__(kGeluThreads) gelu_bias_rows_kernel(BiasRows<T> p) {
  const int pack = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = pack < p.packs;
  float b[V], acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    b[k] = active ? p.bias[pack * V + k] : 0.f;
    acc[k] = 0.f;
  }
  const int64_t step = int64_t(gridDim.y) * blockDim.y;
  // One row's pack: its GELU output and, with GRAD, its gradient, summed into acc.
  auto row = [&](const Pack<T, V>& x, const Pack<T, V>& g, int64_t i) {
    Pack<T, V> ho, go;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xf = static_cast<float>(x.v[k]) + b[k];
      ho.v[k] = static_cast<T>(gelu_element(xf));
      if constexpr (GRAD) {
        go.v[k] = static_cast<T>(gelu_grad_element(xf, static_cast<float>(g.v[k])));
        acc[k] += static_cast<float>(go.v[k]);
      }
    }
    reinterpret_cast<Pack<T, V>*>(p.h)[i] = ho;
    if constexpr (GRAD) reinterpret_cast<Pack<T, V>*>(p.dpre)[i] = go;
  };
  // Two rows a step, both loaded before either is computed (more bytes in flight); the sums still
  // take the thread's rows in order.
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; active && r < p.rows; r += 2 * step) {
    const bool second = r + step < p.rows;
    const int64_t i0 = r * p.packs + pack, i1 = (r + step) * p.packs + pack;
    Pack<T, V> x0 = reinterpret_cast<const Pack<T, V>*>(p.pre)[i0], g0{}, x1{}, g1{};
    if (second) x1 = reinterpret_cast<const Pack<T, V>*>(p.pre)[i1];
    if constexpr (GRAD) {
      g0 = reinterpret_cast<const Pack<T, V>*>(p.grad)[i0];
      if (second) g1 = reinterpret_cast<const Pack<T, V>*>(p.grad)[i1];
    }
    row(x0, g0, i0);
    if (second) row(x1, g1, i1);
  }
  if constexpr (GRAD) {
    extern __shared__ float rows_sums[];  // (blockDim.y, blockDim.x, V)
#pragma unroll
    for (int k = 0; k < V; ++k) rows_sums[(threadIdx.y * blockDim.x + threadIdx.x) * V + k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float s = 0.f;
        for (int y = 0; y < static_cast<int>(blockDim.y); ++y) s += rows_sums[(y * blockDim.x + threadIdx.x) * V + k];
        p.partial[int64_t(blockIdx.y) * p.channels + pack * V + k] = s;
      }
    }
  }
}

// out[c] = the sum of partial[g][c] over the row blocks g: thread (tx, ty) of a (32, kSumRows) block
// adds rows ty, ty + kSumRows, ... of channel blockIdx.x * 32 + tx in order, then thread (tx, 0) the
// kSumRows sums in order.
constexpr int kSumRows = 16;

__global__ void __launch_bounds__(32 * kSumRows) row_block_sums_kernel(const float* __restrict__ partial,
                                                                       float* __restrict__ out, int blocks,
                                                                       int channels) {
  __shared__ float sums[kSumRows][32];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.f;
  if (c < channels) {
    for (int g = threadIdx.y; g < blocks; g += kSumRows) s += partial[int64_t(g) * channels + c];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float total = 0.f;
#pragma unroll
    for (int y = 0; y < kSumRows; ++y) total += sums[y][threadIdx.x];
    out[c] = total;
  }
}

GeluAndGrad gelu_bias_rows_cuda(const at::Tensor& pre, const c10::optional<at::Tensor>& grad, const at::Tensor& bias,
                                int sms, cudaStream_t stream) {
  const bool with_grad = is_given(grad);
  at::Tensor h = at::empty_like(pre);  // channels_last, as pre
  at::Tensor dpre = with_grad ? at::empty_like(pre) : at::empty({0}, pre.options());
  const at::Tensor bias_f = bias.to(at::kFloat).contiguous();
  const int channels = static_cast<int>(pre.size(1));
  const int64_t rows = pre.numel() / std::max(channels, 1);
  at::Tensor dbias_f = at::empty({with_grad ? channels : 0}, pre.options().dtype(at::kFloat));
  if (rows == 0) dbias_f.zero_();  // the sum of no rows
  if (rows > 0 && channels > 0 && h.strides() == pre.strides() && (!with_grad || dpre.strides() == pre.strides())) {
    cuda::dispatch_float_half_bf16(pre.scalar_type(), "gelu_and_grad", [&](auto zero) {
      using scalar_t = decltype(zero);
      constexpr int V = 16 / sizeof(scalar_t);
      const int packs = channels / V;
      const int chunks = (packs + kGeluThreads - 1) / kGeluThreads;
      const int bx = (packs + chunks - 1) / chunks;
      const int by = std::max(1, kGeluThreads / bx);
      const size_t smem = with_grad ? size_t(bx) * by * V * sizeof(float) : 0;
      auto kernel = with_grad ? gelu_bias_rows_kernel<scalar_t, V, true> : gelu_bias_rows_kernel<scalar_t, V, false>;
      // One wave: as many row blocks as stay resident (the rows spread evenly over them).
      int resident = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, bx * by, smem));
      const int64_t row_blocks = std::min<int64_t>(
          {(rows + by - 1) / by, std::max<int64_t>(1, int64_t(sms) * std::max(resident, 1) / chunks), 65535});
      at::Tensor partial = with_grad ? at::empty({row_blocks, channels}, dbias_f.options()) : dbias_f;
      const BiasRows<scalar_t> p{pre.data_ptr<scalar_t>(),
                                 with_grad ? grad->data_ptr<scalar_t>() : nullptr,
                                 bias_f.data_ptr<float>(),
                                 h.data_ptr<scalar_t>(),
                                 with_grad ? dpre.data_ptr<scalar_t>() : nullptr,
                                 partial.data_ptr<float>(),
                                 rows,
                                 packs,
                                 channels};
      kernel<<<dim3(chunks, static_cast<unsigned>(row_blocks)), dim3(bx, by), smem, stream>>>(p);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      if (with_grad) {
        row_block_sums_kernel<<<(channels + 31) / 32, dim3(32, kSumRows), 0, stream>>>(
            partial.data_ptr<float>(), dbias_f.data_ptr<float>(), static_cast<int>(row_blocks), channels);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
    });
  } else if (rows > 0 && channels > 0) {
    return gelu_and_grad_composite(pre, grad, bias);
  }
  at::Tensor dbias = with_grad ? dbias_f.to(bias.scalar_type()) : at::empty({0}, bias.options());
  return {h, dpre, dbias};
}

GeluAndGrad gelu_and_grad_cuda(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                               const c10::optional<at::Tensor>& bias) {
  check_gelu_and_grad_args(pre, grad, bias);
  const bool with_bias = is_given(bias);
  const bool rows_aligned = cuda::aligned16(pre) && (!is_given(grad) || cuda::aligned16(*grad));
  if (!gelu_and_grad_in_kernel_domain(pre, grad, bias) || (with_bias && !rows_aligned)) {
    return gelu_and_grad_composite(pre, grad, bias);
  }
  const c10::cuda::CUDAGuard guard(pre.device());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (with_bias) return gelu_bias_rows_cuda(pre, grad, *bias, sms, stream);
  at::Tensor h = at::empty_like(pre), dpre = at::empty_like(pre);
  // empty_like keeps a dense tensor's strides: the four tensors share one memory order.
  if (h.strides() != pre.strides()) return gelu_and_grad_composite(pre, grad, bias);
  const int64_t numel = pre.numel();
  const at::Tensor none = at::empty({0}, pre.options());
  if (numel == 0) return {h, dpre, none};
  cuda::dispatch_float_half_bf16(pre.scalar_type(), "gelu_and_grad", [&](auto zero) {
    using scalar_t = decltype(zero);
    auto run = [&](auto v_const) {
      constexpr int V = decltype(v_const)::value;
      const int64_t packs = numel / V;
      const int64_t blocks = std::min<int64_t>((packs + kGeluThreads - 1) / kGeluThreads, int64_t(sms) * 8);
      gelu_and_grad_kernel<scalar_t, V><<<static_cast<unsigned>(blocks), kGeluThreads, 0, stream>>>(
          pre.data_ptr<scalar_t>(), grad->data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), dpre.data_ptr<scalar_t>(),
          static_cast<uint32_t>(packs));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    constexpr int V = 16 / sizeof(scalar_t);
    if (numel % V == 0 && cuda::aligned16(pre) && cuda::aligned16(*grad) && cuda::aligned16(h) &&
        cuda::aligned16(dpre)) {
      run(std::integral_constant<int, V>{});
    } else {
      run(std::integral_constant<int, 1>{});
    }
  });
  return {h, dpre, none};
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("gelu_and_grad", &gelu_and_grad_cuda);
}

}  // namespace mmo1d
