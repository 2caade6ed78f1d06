// CUDA kernel of mmo1d::gelu_and_grad (gelu_and_grad.h): h = gelu(pre) and dpre = gelu_backward(grad,
// pre) in one pass over pre and grad in memory order, 16 bytes of each tensor a thread at a time where
// the pointers allow it. Each element's arithmetic is ATen's exact GELU and its gradient
// (ActivationGeluKernel.cu, GeluType::None) written as ATen writes them, so that nvcc compiles the same
// operations (its FMA contraction included): the values of at::gelu and at::gelu_backward.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAMathCompat.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>

#include "../../gelu_and_grad.h"
#include "../common/common.cuh"

namespace mmo1d {
namespace {

constexpr int kGeluThreads = 256;

template <typename T, int V>
struct alignas(sizeof(T) * V) GeluPack {
  T v[V];
};

// One element in float32: *h = gelu(x), *dx = dy * gelu'(x).
__device__ __forceinline__ void gelu_and_grad_element(float x, float dy, float* h, float* dx) {
  constexpr float kAlpha = M_SQRT1_2;
  constexpr float kBeta = M_2_SQRTPI * M_SQRT1_2 * float(0.5);
  *h = x * float(0.5) * (float(1) + ::erf(x * kAlpha));
  const float cdf = float(0.5) * (float(1) + ::erf(x * kAlpha));
  const float pdf = c10::cuda::compat::exp(float(-0.5) * x * x) * kBeta;
  *dx = dy * (cdf + x * pdf);
}

// Packs of V elements from pack 0 to packs - 1 (grid-stride).
template <typename T, int V>
__global__ void __launch_bounds__(kGeluThreads) gelu_and_grad_kernel(const T* __restrict__ pre,
                                                                     const T* __restrict__ grad, T* __restrict__ h,
                                                                     T* __restrict__ dpre, uint32_t packs) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const GeluPack<T, V> x = reinterpret_cast<const GeluPack<T, V>*>(pre)[i];
    const GeluPack<T, V> g = reinterpret_cast<const GeluPack<T, V>*>(grad)[i];
    GeluPack<T, V> ho, go;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float hv, dv;
      gelu_and_grad_element(static_cast<float>(x.v[k]), static_cast<float>(g.v[k]), &hv, &dv);
      ho.v[k] = static_cast<T>(hv);
      go.v[k] = static_cast<T>(dv);
    }
    reinterpret_cast<GeluPack<T, V>*>(h)[i] = ho;
    reinterpret_cast<GeluPack<T, V>*>(dpre)[i] = go;
  }
}

std::tuple<at::Tensor, at::Tensor> gelu_and_grad_cuda(const at::Tensor& pre, const at::Tensor& grad) {
  if (!gelu_and_grad_in_kernel_domain(pre, grad)) return gelu_and_grad_composite(pre, grad);
  at::Tensor h = at::empty_like(pre), dpre = at::empty_like(pre);
  // empty_like keeps a dense tensor's strides: the four tensors share one memory order.
  if (h.strides() != pre.strides()) return gelu_and_grad_composite(pre, grad);
  const int64_t numel = pre.numel();
  if (numel == 0) return {h, dpre};
  const c10::cuda::CUDAGuard guard(pre.device());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  cuda::dispatch_float_half_bf16(pre.scalar_type(), "gelu_and_grad", [&](auto zero) {
    using scalar_t = decltype(zero);
    auto run = [&](auto v_const) {
      constexpr int V = decltype(v_const)::value;
      const int64_t packs = numel / V;
      const int64_t blocks = std::min<int64_t>((packs + kGeluThreads - 1) / kGeluThreads, int64_t(sms) * 8);
      gelu_and_grad_kernel<scalar_t, V><<<static_cast<unsigned>(blocks), kGeluThreads, 0, stream>>>(
          pre.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), dpre.data_ptr<scalar_t>(),
          static_cast<uint32_t>(packs));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    constexpr int V = 16 / sizeof(scalar_t);
    if (numel % V == 0 && cuda::aligned16(pre) && cuda::aligned16(grad) && cuda::aligned16(h) &&
        cuda::aligned16(dpre)) {
      run(std::integral_constant<int, V>{});
    } else {
      run(std::integral_constant<int, 1>{});
    }
  });
  return {h, dpre};
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("gelu_and_grad", &gelu_and_grad_cuda);
}

}  // namespace mmo1d
