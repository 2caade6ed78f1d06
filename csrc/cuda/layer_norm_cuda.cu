// CUDA kernels of the channels-last layer norm (optionally fused with GELU).
//
// Rows of C contiguous values (an NHWC tensor seen as (N*H*W, C)). A group of G lanes of one warp
// (G a power of two up to 32, sized to the row) normalises one row: each lane loads 16-byte vectors
// of the row into registers, the group reduces the sum and then the centred sum of squares with
// shuffles (two passes over registers, no Welford), and writes the row in the output dtype. Rows
// wider than the register cache reload the rest from global memory (L1).
// Backward: the same grouping; each lane keeps its columns' partial sums of dy * xhat and dy over
// the rows it visits (grid-stride), the warp adds its groups with shuffles and writes one partial
// row per warp; a second kernel adds the partial rows of both sums in a fixed order (deterministic, no
// atomics) and writes the weight and bias gradients.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../layer_norm.h"
#include "common/common.cuh"
#include "common/cuda_context.h"

namespace mmo1d {
namespace {

using cuda::group_sum;

constexpr int kLnThreads = 256;
constexpr int kLnWarps = kLnThreads / 32;
constexpr int kLnValues = static_cast<int>(kLayerNormMaxFusedChannels / 32);  // values per lane

using cuda::Pack;

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* __restrict__ p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* __restrict__ p, const Pack<T, V>& v) {
  *reinterpret_cast<Pack<T, V>*>(p) = v;
}

template <typename out_t, typename acc_t>
__device__ __forceinline__ out_t to_out(acc_t v) {
  if constexpr (std::is_same_v<out_t, acc_t>) {
    return v;
  } else {
    return static_cast<out_t>(static_cast<float>(v));
  }
}

template <typename acc_t>
__device__ __forceinline__ acc_t gelu_forward(acc_t y) {
  return acc_t(0.5) * y * (acc_t(1) + erf(y * acc_t(M_SQRT1_2)));
}

// d gelu(y) / dy, as ATen's GeluBackward (erf form).
template <typename acc_t>
__device__ __forceinline__ acc_t gelu_grad(acc_t y) {
  const acc_t cdf = acc_t(0.5) * (acc_t(1) + erf(y * acc_t(M_SQRT1_2)));
  const acc_t pdf = exp(acc_t(-0.5) * y * y) * acc_t(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  return cdf + y * pdf;
}

template <typename acc_t>
__device__ __forceinline__ acc_t inv_sqrt(acc_t v) {
  if constexpr (std::is_same_v<acc_t, double>) {
    return 1.0 / sqrt(v);
  } else {
    return rsqrtf(v);
  }
}

// What both kernels read: M rows of C values x, the affine weight w and bias b (C values), and G,
// the lanes per row.
template <typename in_t, typename acc_t>
struct LayerNormRows {
  const in_t* x;
  const acc_t* w;
  const acc_t* b;
  int64_t M;
  int C, G;
};

// The arguments of layer_norm_last_fwd_kernel, built by its launcher.
template <typename in_t, typename out_t, typename acc_t>
struct LayerNormFwdParams {
  LayerNormRows<in_t, acc_t> rows;
  out_t* y;
  acc_t* mean_out;
  acc_t* rstd_out;
  acc_t eps;
};

// One row per group of G lanes; lane l holds vectors j = l + k * G (k < ceil(C / V / G)) of its row.
template <typename in_t, typename out_t, typename acc_t, int V, bool GELU>
__global__ void __launch_bounds__(kLnThreads)
    layer_norm_last_fwd_kernel(const LayerNormFwdParams<in_t, out_t, acc_t> params) {
  const acc_t* __restrict__ w = params.rows.w;
  const acc_t* __restrict__ b = params.rows.b;
  const int C = params.rows.C, G = params.rows.G;
  constexpr int kCache = kLnValues / V;
  const int lane = threadIdx.x & (G - 1);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kLnThreads / G) + threadIdx.x / G;
  const bool valid = row < params.rows.M;  // invalid lanes still take part in the shuffles
  const int nv = C / V;
  const int nch = (nv + G - 1) / G;
  const in_t* xr = params.rows.x + (valid ? row : 0) * C;
  auto load = [&](int j, acc_t* v) {
    const auto p = load_pack<in_t, V>(xr + j * V);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      v[e] = static_cast<acc_t>(p.v[e]);
    }
  };
  acc_t cache[kCache][V];
#pragma unroll
  for (int k = 0; k < kCache; ++k) {
    const int j = lane + k * G;
    if (valid && j < nv) {
      load(j, cache[k]);
    }
  }
  // f(j, v) for each of the lane's vectors j of the row: the first kCache from registers, the rest
  // loaded again (L1).
  auto for_each_vector = [&](auto&& f) {
#pragma unroll
    for (int k = 0; k < kCache; ++k) {
      const int j = lane + k * G;
      if (valid && j < nv) {
        f(j, cache[k]);
      }
    }
    for (int k = kCache; k < nch; ++k) {
      const int j = lane + k * G;
      if (valid && j < nv) {
        acc_t v[V];
        load(j, v);
        f(j, v);
      }
    }
  };
  acc_t sum = 0;
  for_each_vector([&](int, const acc_t* v) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      sum += v[e];
    }
  });
  const acc_t mean = group_sum(sum, G) / C;
  acc_t sq = 0;
  for_each_vector([&](int, const acc_t* v) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const acc_t d = v[e] - mean;
      sq += d * d;
    }
  });
  const acc_t rstd = inv_sqrt(group_sum(sq, G) / C + params.eps);
  if (!valid) {
    return;
  }
  if (lane == 0) {
    params.mean_out[row] = mean;
    params.rstd_out[row] = rstd;
  }
  out_t* yr = params.y + row * C;
  for_each_vector([&](int j, const acc_t* v) {
    Pack<out_t, V> o;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int c = j * V + e;
      acc_t t = (v[e] - mean) * rstd * w[c] + b[c];
      if constexpr (GELU) {
        t = gelu_forward(t);
      }
      o.v[e] = to_out<out_t>(t);
    }
    store_pack<out_t, V>(yr + j * V, o);
  });
}

// The arguments of layer_norm_last_bwd_kernel, built by its launcher.
template <typename in_t, typename g_t, typename acc_t>
struct LayerNormBwdParams {
  LayerNormRows<in_t, acc_t> rows;
  const g_t* dy;
  const acc_t* mean;
  const acc_t* rstd;
  in_t* dx;
  acc_t* part_w;
  acc_t* part_b;
};

// Rows are visited grid-stride by groups of G lanes; a lane's columns fit in its NCH register
// vectors (NCH * V <= 32 values, so C <= kLayerNormMaxFusedChannels). part_w / part_b: (gridDim.x * kLnWarps, C), one
// partial row per warp (nullptr when the weight / bias gradient is not wanted).
template <typename in_t, typename g_t, typename acc_t, int V, int NCH, bool GELU>
__global__ void __launch_bounds__(kLnThreads)
    layer_norm_last_bwd_kernel(const LayerNormBwdParams<in_t, g_t, acc_t> params) {
  const g_t* __restrict__ dy = params.dy;
  const in_t* __restrict__ x = params.rows.x;
  const acc_t* __restrict__ mean = params.mean;
  const acc_t* __restrict__ rstd = params.rstd;
  const acc_t* __restrict__ w = params.rows.w;
  const acc_t* __restrict__ b = params.rows.b;
  in_t* __restrict__ dx = params.dx;
  acc_t* __restrict__ part_w = params.part_w;
  acc_t* __restrict__ part_b = params.part_b;
  const int64_t M = params.rows.M;
  const int C = params.rows.C, G = params.rows.G;
  const int lane = threadIdx.x & (G - 1);
  const int rows_per_block = kLnThreads / G;
  const int nv = C / V;
  const bool want_wb = part_w != nullptr;
  acc_t acc_w[NCH][V];
  acc_t acc_b[NCH][V];
#pragma unroll
  for (int k = 0; k < NCH; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      acc_w[k][e] = 0;
      acc_b[k][e] = 0;
    }
  }
  // The row's upstream gradient (through GELU when fused) and normalised input at vector j.
  auto load = [&](int64_t row, int j, acc_t mu, acc_t rs, acc_t* d, acc_t* xh) {
    const auto px = load_pack<in_t, V>(x + row * C + j * V);
    const auto pg = load_pack<g_t, V>(dy + row * C + j * V);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      xh[e] = (static_cast<acc_t>(px.v[e]) - mu) * rs;
      d[e] = static_cast<acc_t>(pg.v[e]);
      if constexpr (GELU) {
        const int c = j * V + e;
        d[e] *= gelu_grad(xh[e] * w[c] + b[c]);
      }
    }
  };
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < M;
       base += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t row = base + threadIdx.x / G;
    const bool valid = row < M;
    const acc_t mu = valid ? mean[row] : acc_t(0);
    const acc_t rs = valid ? rstd[row] : acc_t(0);
    acc_t sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < NCH; ++k) {
      const int j = lane + k * G;
      if (valid && j < nv) {
        acc_t d[V], xh[V];
        load(row, j, mu, rs, d, xh);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const acc_t g = d[e] * w[j * V + e];
          sg += g;
          sgx += g * xh[e];
          acc_w[k][e] += d[e] * xh[e];
          acc_b[k][e] += d[e];
        }
      }
    }
    sg = group_sum(sg, G) / C;
    sgx = group_sum(sgx, G) / C;
    if (dx != nullptr && valid) {
#pragma unroll
      for (int k = 0; k < NCH; ++k) {
        const int j = lane + k * G;
        if (j < nv) {
          acc_t d[V], xh[V];
          load(row, j, mu, rs, d, xh);
          Pack<in_t, V> o;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            o.v[e] = to_out<in_t>(rs * (d[e] * w[j * V + e] - sg - xh[e] * sgx));
          }
          store_pack<in_t, V>(dx + row * C + j * V, o);
        }
      }
    }
  }
  if (!want_wb) {
    return;
  }
  // Add the warp's groups (they hold the same columns), then lanes of group 0 write the warp's row.
#pragma unroll
  for (int k = 0; k < NCH; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      for (int o = G; o < 32; o <<= 1) {
        acc_w[k][e] += __shfl_xor_sync(0xffffffffu, acc_w[k][e], o);
        acc_b[k][e] += __shfl_xor_sync(0xffffffffu, acc_b[k][e], o);
      }
    }
  }
  if ((threadIdx.x & 31) >= G) {
    return;
  }
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * kLnWarps + threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k < NCH; ++k) {
    const int j = lane + k * G;
    if (j < nv) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        part_w[slot * C + j * V + e] = acc_w[k][e];
        part_b[slot * C + j * V + e] = acc_b[k][e];
      }
    }
  }
}

// Column sums of the two (slots, C) partial arrays at `part` (dy * xhat, then dy): blockIdx.y picks the
// array, a block 32 columns. Thread (x, y) adds rows y, y + 32, ... of its column in four interleaved
// sums, then row 0 of the block adds the 32 threads' sums in order: the same order at every call.
constexpr int kSumRows = 32;

template <typename acc_t>
__global__ void __launch_bounds__(32 * kSumRows)
    layer_norm_partials_sum_kernel(const acc_t* __restrict__ part, int64_t slots, int C, acc_t* __restrict__ dw,
                                   acc_t* __restrict__ db) {
  __shared__ acc_t sums[kSumRows][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const acc_t* src = part + blockIdx.y * slots * C + c;
  acc_t s[4] = {0, 0, 0, 0};
  if (c < C) {
    int64_t r = threadIdx.y;
    for (; r + 3 * kSumRows < slots; r += 4 * kSumRows) {
#pragma unroll
      for (int k = 0; k < 4; ++k) s[k] += src[(r + k * kSumRows) * C];
    }
    for (int k = 0; r < slots; r += kSumRows, ++k) s[k] += src[r * C];
  }
  sums[threadIdx.y][threadIdx.x] = (s[0] + s[1]) + (s[2] + s[3]);
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  acc_t total = 0;
#pragma unroll 8
  for (int k = 0; k < kSumRows; ++k) total += sums[k][threadIdx.x];
  acc_t* out = blockIdx.y == 0 ? dw : db;
  if (out != nullptr) out[c] = total;
}

// Lanes per row: enough for one vector per lane up to a warp.
int lanes_per_row(int64_t vectors) {
  int g = 1;
  while (g < 32 && g < vectors) {
    g <<= 1;
  }
  return g;
}

// `t` as a contiguous tensor of dtype acc, without a call when it is one already.
at::Tensor as_acc(const at::Tensor& t, at::ScalarType acc) {
  return t.scalar_type() == acc && t.is_contiguous() ? t : t.to(acc).contiguous();
}

// Calls f(in_t{}, out_t{}) for the supported pairs (checked before by check_layer_norm_args).
template <typename F>
void dispatch_pair(at::ScalarType in, at::ScalarType out, F&& f) {
  using BF = c10::BFloat16;
  using H = c10::Half;
  if (in == out) {
    switch (in) {
      case at::kFloat:
        return f(float{}, float{});
      case at::kDouble:
        return f(double{}, double{});
      case at::kHalf:
        return f(H{}, H{});
      case at::kBFloat16:
        return f(BF{}, BF{});
      default:
        break;
    }
  } else if (out == at::kFloat && in == at::kHalf) {
    return f(H{}, float{});
  } else if (out == at::kFloat && in == at::kBFloat16) {
    return f(BF{}, float{});
  } else if (in == at::kFloat && out == at::kHalf) {
    return f(float{}, H{});
  } else if (in == at::kFloat && out == at::kBFloat16) {
    return f(float{}, BF{});
  }
  TORCH_CHECK(false, "layer_norm_last: unsupported dtype pair ", in, " -> ", out);
}

// Vector width in elements: 16 bytes of the narrower of the two dtypes, when the row length and
// every pointer allow it; 1 otherwise.
template <typename a_t, typename b_t>
constexpr int vector_width() {
  return 16 / static_cast<int>(std::max(sizeof(a_t), sizeof(b_t)));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward_cuda(const at::Tensor& input, const at::Tensor& weight,
                                                            const at::Tensor& bias, double eps, bool gelu,
                                                            at::ScalarType out_dtype) {
  const int64_t C = check_layer_norm_args("layer_norm_last", input, weight, bias, eps, out_dtype);
  TORCH_CHECK(input.is_cuda(), "layer_norm_last: expected a CUDA tensor");
  TORCH_CHECK(C <= INT32_MAX / 2, "layer_norm_last: too many channels");
  const c10::cuda::CUDAGuard guard(input.device());
  const auto x = input.contiguous();
  const auto acc = layer_norm_acc_type(input.scalar_type());
  const auto w = as_acc(weight, acc);
  const auto b = as_acc(bias, acc);
  const int64_t M = x.numel() / C;
  auto y = at::empty(x.sizes(), x.options().dtype(out_dtype));
  auto mean = at::empty({M}, x.options().dtype(acc));
  auto rstd = at::empty({M}, x.options().dtype(acc));
  if (M == 0) {
    return {y, mean, rstd};
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_pair(x.scalar_type(), out_dtype, [&](auto in_v, auto out_v) {
    using in_t = decltype(in_v);
    using out_t = decltype(out_v);
    using acc_t = std::conditional_t<std::is_same_v<in_t, double>, double, float>;
    auto launch = [&](auto v_const, auto gelu_const) {
      constexpr int V = decltype(v_const)::value;
      constexpr bool GELU = decltype(gelu_const)::value;
      const int G = lanes_per_row(C / V);
      const int64_t blocks = (M + kLnThreads / G - 1) / (kLnThreads / G);
      const LayerNormFwdParams<in_t, out_t, acc_t> params{
          .rows = {x.data_ptr<in_t>(), w.data_ptr<acc_t>(), b.data_ptr<acc_t>(), M, static_cast<int>(C), G},
          .y = y.data_ptr<out_t>(),
          .mean_out = mean.data_ptr<acc_t>(),
          .rstd_out = rstd.data_ptr<acc_t>(),
          .eps = static_cast<acc_t>(eps)};
      layer_norm_last_fwd_kernel<in_t, out_t, acc_t, V, GELU><<<blocks, kLnThreads, 0, stream>>>(params);
    };
    constexpr int VW = vector_width<in_t, out_t>();
    const bool vec = C % VW == 0 && cuda::aligned16(x) && cuda::aligned16(y);
    auto with_gelu = [&](auto v_const) {
      if (gelu) {
        launch(v_const, std::true_type{});
      } else {
        launch(v_const, std::false_type{});
      }
    };
    if (vec) {
      with_gelu(std::integral_constant<int, VW>{});
    } else {
      with_gelu(std::integral_constant<int, 1>{});
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& mean, const at::Tensor& rstd,
                                                             const at::Tensor& weight, const at::Tensor& bias,
                                                             bool gelu, std::array<bool, 3> output_mask) {
  const int64_t C = check_layer_norm_args("layer_norm_last_backward", input, weight, bias, 1.0, input.scalar_type());
  TORCH_CHECK(grad_output.sizes() == input.sizes(),
              "layer_norm_last_backward: grad_output must have the input's shape");
  TORCH_CHECK(input.is_cuda() && grad_output.is_cuda(), "layer_norm_last_backward: expected CUDA tensors");
  const auto acc = layer_norm_acc_type(input.scalar_type());
  const int64_t M = input.numel() / C;
  TORCH_CHECK(mean.numel() == M && rstd.numel() == M && mean.scalar_type() == acc && rstd.scalar_type() == acc,
              "layer_norm_last_backward: mean and rstd must be the forward's statistics");
  if (C > kLayerNormMaxFusedChannels || !layer_norm_dtypes_supported(input.scalar_type(), grad_output.scalar_type())) {
    return layer_norm_last_backward_composite(grad_output, input, mean, rstd, weight, bias, gelu, output_mask);
  }
  const c10::cuda::CUDAGuard guard(input.device());
  const auto x = input.contiguous();
  const auto dy = grad_output.contiguous();
  const auto w = as_acc(weight, acc);
  const auto b = as_acc(bias, acc);
  const bool want_wb = output_mask[1] || output_mask[2];
  at::Tensor dx = output_mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor grad_weight, grad_bias;
  if (M == 0) {
    if (output_mask[1]) grad_weight = at::zeros_like(weight);
    if (output_mask[2]) grad_bias = at::zeros_like(bias);
    return {dx, grad_weight, grad_bias};
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  at::Tensor part;  // (2, slots, C): the partial sums of dy * xhat and of dy
  dispatch_pair(x.scalar_type(), dy.scalar_type(), [&](auto in_v, auto g_v) {
    using in_t = decltype(in_v);
    using g_t = decltype(g_v);
    using acc_t = std::conditional_t<std::is_same_v<in_t, double>, double, float>;
    auto launch = [&](auto v_const, auto nch_const, auto gelu_const) {
      constexpr int V = decltype(v_const)::value;
      constexpr int NCH = decltype(nch_const)::value;
      constexpr bool GELU = decltype(gelu_const)::value;
      const int G = lanes_per_row(C / V);
      const int rows_per_block = kLnThreads / G;
      const int64_t blocks = std::min<int64_t>((M + rows_per_block - 1) / rows_per_block, 2 * sms);
      if (want_wb) part = at::empty({2, blocks * kLnWarps, C}, x.options().dtype(acc));
      const LayerNormBwdParams<in_t, g_t, acc_t> params{
          .rows = {x.data_ptr<in_t>(), w.data_ptr<acc_t>(), b.data_ptr<acc_t>(), M, static_cast<int>(C), G},
          .dy = dy.data_ptr<g_t>(),
          .mean = mean.data_ptr<acc_t>(),
          .rstd = rstd.data_ptr<acc_t>(),
          .dx = dx.defined() ? dx.data_ptr<in_t>() : nullptr,
          .part_w = want_wb ? part.data_ptr<acc_t>() : nullptr,
          .part_b = want_wb ? part.data_ptr<acc_t>() + part.stride(0) : nullptr};
      layer_norm_last_bwd_kernel<in_t, g_t, acc_t, V, NCH, GELU><<<blocks, kLnThreads, 0, stream>>>(params);
    };
    auto with_gelu = [&](auto v_const, auto nch_const) {
      if (gelu) {
        launch(v_const, nch_const, std::true_type{});
      } else {
        launch(v_const, nch_const, std::false_type{});
      }
    };
    constexpr int VW = vector_width<in_t, g_t>();
    const bool vec = C % VW == 0 && cuda::aligned16(x) && cuda::aligned16(dy) && cuda::aligned16(dx);
    if (!vec) {
      with_gelu(std::integral_constant<int, 1>{}, std::integral_constant<int, kLnValues>{});
      return;
    }
    // Register vectors per lane: the fewest of 1, 2, 4, ... that hold the lane's columns.
    const int64_t nv = C / VW;
    const int64_t nch = (nv + lanes_per_row(nv) - 1) / lanes_per_row(nv);
    if constexpr (VW >= 4) {
      if (nch <= 1) return with_gelu(std::integral_constant<int, VW>{}, std::integral_constant<int, 1>{});
      if (nch <= 2) return with_gelu(std::integral_constant<int, VW>{}, std::integral_constant<int, 2>{});
      if (nch <= 4) return with_gelu(std::integral_constant<int, VW>{}, std::integral_constant<int, 4>{});
    }
    with_gelu(std::integral_constant<int, VW>{}, std::integral_constant<int, kLnValues / VW>{});
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!want_wb) return {dx, grad_weight, grad_bias};
  if (output_mask[1]) grad_weight = at::empty({C}, x.options().dtype(acc));
  if (output_mask[2]) grad_bias = at::empty({C}, x.options().dtype(acc));
  AT_DISPATCH_FLOATING_TYPES(acc, "layer_norm_last_backward", [&] {
    const dim3 grid(static_cast<unsigned>((C + 31) / 32), 2);
    layer_norm_partials_sum_kernel<scalar_t><<<grid, dim3(32, kSumRows), 0, stream>>>(
        part.data_ptr<scalar_t>(), part.size(1), static_cast<int>(C),
        output_mask[1] ? grad_weight.data_ptr<scalar_t>() : nullptr,
        output_mask[2] ? grad_bias.data_ptr<scalar_t>() : nullptr);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (output_mask[1] && weight.scalar_type() != acc) grad_weight = grad_weight.to(weight.scalar_type());
  if (output_mask[2] && bias.scalar_type() != acc) grad_bias = grad_bias.to(bias.scalar_type());
  return {dx, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("layer_norm_last", &forward_cuda);
  m.impl("layer_norm_last_backward", &backward_cuda);
}

}  // namespace mmo1d
