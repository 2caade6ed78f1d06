// CUDA kernels of mmo1d::gelu_and_grad (gelu_and_grad.h).
// - Without a bias: h = gelu(pre) and dpre = gelu_backward(grad, pre) in one pass over pre and grad in
//   memory order, 16 bytes of each tensor a thread at a time where the pointers allow it.
// - With a bias (channels_last rows of C channels): x = pre + bias in float32 and h = gelu(x). Without
//   grad in memory order, as above (a pack's bias that of its place in the row). With grad, also dpre and
//   the bias's gradient: thread (tx, ty) of block (bx, by) takes pack tx of column chunk bx in rows
//   by * BY + ty + k * gridDim.y * BY, two at a time (its channels fixed, so it sums its dpre in
//   registers); the block adds its BY rows of threads in order, a second kernel the row blocks in a fixed
//   order: the sum is deterministic, at most (rows per thread + BY + gridDim.y / 16 + 16) additions deep.
// Each element's arithmetic is ATen's exact GELU and its gradient (ActivationGeluKernel.cu,
// GeluType::None) written as ATen writes them, so that nvcc compiles the same operations (its FMA
// contraction included): the values of at::gelu and at::gelu_backward at the same float32 x.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
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
#include "../common/cuda_context.h"

namespace mmo1d {
namespace {

constexpr int kGeluThreads = 256;
// The row kernel's blocks: up to kRowsThreads threads (BY rows of threads), each thread kMinRowPairs
// pairs of rows or more, so that the row blocks' partial sums stay a small part of the traffic.
constexpr int kRowsThreads = 512;
constexpr int kMinRowPairs = 4;

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

// h = gelu(pre + bias) in memory order: pack i of rows of row_packs packs takes the bias of pack
// i % row_packs (grid-stride; bias aligned to 4 V bytes).
template <typename T, int V>
__global__ void __launch_bounds__(kGeluThreads) gelu_bias_kernel(const T* __restrict__ pre,
                                                                 const float* __restrict__ bias, T* __restrict__ h,
                                                                 uint32_t packs, uint32_t row_packs) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const Pack<T, V> x = reinterpret_cast<const Pack<T, V>*>(pre)[i];
    const Pack<float, V> b = reinterpret_cast<const Pack<float, V>*>(bias)[i % row_packs];
    Pack<T, V> ho;
#pragma unroll
    for (int k = 0; k < V; ++k) ho.v[k] = static_cast<T>(gelu_element(static_cast<float>(x.v[k]) + b.v[k]));
    reinterpret_cast<Pack<T, V>*>(h)[i] = ho;
  }
}

template <typename T>
struct BiasRows {
  const T* pre;
  const T* grad;
  const float* bias;
  T* h;
  T* dpre;
  float* partial;  // (gridDim.y, channels): each row block's sums of dpre
  int64_t rows;
  int packs;  // per row
  int channels;
};

template <typename T, int V>
__global__ void __launch_bounds__(kRowsThreads) gelu_bias_rows_kernel(BiasRows<T> p) {
  const int pack = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = pack < p.packs;
  float b[V], acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    b[k] = active ? p.bias[pack * V + k] : 0.f;
    acc[k] = 0.f;
  }
  const int64_t step = int64_t(gridDim.y) * blockDim.y;
  // One row's pack: its GELU output and gradient, the gradient summed into acc.
  auto row = [&](const Pack<T, V>& x, const Pack<T, V>& g, int64_t i) {
    Pack<T, V> ho, go;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xf = static_cast<float>(x.v[k]) + b[k];
      ho.v[k] = static_cast<T>(gelu_element(xf));
      go.v[k] = static_cast<T>(gelu_grad_element(xf, static_cast<float>(g.v[k])));
      acc[k] += static_cast<float>(go.v[k]);
    }
    reinterpret_cast<Pack<T, V>*>(p.h)[i] = ho;
    reinterpret_cast<Pack<T, V>*>(p.dpre)[i] = go;
  };
  // Two rows a step, both loaded before either is computed (more bytes in flight); the sums still
  // take the thread's rows in order.
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; active && r < p.rows; r += 2 * step) {
    const bool second = r + step < p.rows;
    const int64_t i0 = r * p.packs + pack, i1 = (r + step) * p.packs + pack;
    const Pack<T, V> x0 = reinterpret_cast<const Pack<T, V>*>(p.pre)[i0];
    const Pack<T, V> g0 = reinterpret_cast<const Pack<T, V>*>(p.grad)[i0];
    Pack<T, V> x1{}, g1{};
    if (second) {
      x1 = reinterpret_cast<const Pack<T, V>*>(p.pre)[i1];
      g1 = reinterpret_cast<const Pack<T, V>*>(p.grad)[i1];
    }
    row(x0, g0, i0);
    if (second) row(x1, g1, i1);
  }
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

// With grad: the row kernel, then the row blocks' sums.
void gelu_bias_rows_cuda(const at::Tensor& pre, const at::Tensor& grad, const at::Tensor& bias_f, at::Tensor& h,
                         at::Tensor& dpre, at::Tensor& dbias_f, int64_t rows, int sms, cudaStream_t stream) {
  const int channels = static_cast<int>(pre.size(1));
  cuda::dispatch_float_half_bf16(pre.scalar_type(), "gelu_and_grad", [&](auto zero) {
    using scalar_t = decltype(zero);
    constexpr int V = 16 / sizeof(scalar_t);
    const int packs = channels / V;
    const int chunks = cuda::ceil_div(packs, kRowsThreads);
    const int bx = cuda::ceil_div(packs, chunks);
    const int by = std::max(1, kRowsThreads / bx);
    const size_t smem = size_t(bx) * by * V * sizeof(float);
    auto kernel = gelu_bias_rows_kernel<scalar_t, V>;
    // At most one wave (as many row blocks as stay resident, the rows spread evenly over them), each
    // thread at least kMinRowPairs pairs of rows.
    int resident = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, bx * by, smem));
    const int64_t row_blocks =
        std::min<int64_t>({std::max<int64_t>(1, rows / (int64_t(by) * 2 * kMinRowPairs)),
                           std::max<int64_t>(1, int64_t(sms) * std::max(resident, 1) / chunks), 65535});
    at::Tensor partial = at::empty({row_blocks, channels}, dbias_f.options());
    const BiasRows<scalar_t> p{pre.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), bias_f.data_ptr<float>(),
                               h.data_ptr<scalar_t>(),   dpre.data_ptr<scalar_t>(), partial.data_ptr<float>(),
                               rows,                     packs,                     channels};
    kernel<<<dim3(chunks, static_cast<unsigned>(row_blocks)), dim3(bx, by), smem, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    row_block_sums_kernel<<<(channels + 31) / 32, dim3(32, kSumRows), 0, stream>>>(
        partial.data_ptr<float>(), dbias_f.data_ptr<float>(), static_cast<int>(row_blocks), channels);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

GeluAndGrad gelu_bias_cuda(const at::Tensor& pre, const c10::optional<at::Tensor>& grad, const at::Tensor& bias,
                           int sms, cudaStream_t stream) {
  const bool with_grad = is_given(grad);
  at::Tensor h = at::empty_like(pre);  // channels_last, as pre
  at::Tensor dpre = with_grad ? at::empty_like(pre) : at::empty({0}, pre.options());
  if (h.strides() != pre.strides() || (with_grad && dpre.strides() != pre.strides())) {
    return gelu_and_grad_composite(pre, grad, bias);
  }
  at::Tensor bias_f = bias.to(at::kFloat).contiguous();
  if (!cuda::aligned_to(bias_f, 32)) bias_f = bias_f.clone();  // the forward's packs of up to 8 floats
  const int channels = static_cast<int>(pre.size(1));
  const int64_t rows = channels > 0 ? pre.numel() / channels : 0;
  at::Tensor dbias_f = at::empty({with_grad ? channels : 0}, pre.options().dtype(at::kFloat));
  if (rows == 0) dbias_f.zero_();  // the sum of no rows
  if (rows > 0 && channels > 0) {
    if (with_grad) {
      gelu_bias_rows_cuda(pre, *grad, bias_f, h, dpre, dbias_f, rows, sms, stream);
    } else {
      cuda::dispatch_float_half_bf16(pre.scalar_type(), "gelu_and_grad", [&](auto zero) {
        using scalar_t = decltype(zero);
        constexpr int V = 16 / sizeof(scalar_t);
        const int64_t packs = pre.numel() / V;
        const int64_t blocks = std::min<int64_t>((packs + kGeluThreads - 1) / kGeluThreads, int64_t(sms) * 8);
        gelu_bias_kernel<scalar_t, V><<<static_cast<unsigned>(blocks), kGeluThreads, 0, stream>>>(
            pre.data_ptr<scalar_t>(), bias_f.data_ptr<float>(), h.data_ptr<scalar_t>(), static_cast<uint32_t>(packs),
            static_cast<uint32_t>(channels / V));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    }
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
  if (with_bias) return gelu_bias_cuda(pre, grad, *bias, sms, stream);
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
