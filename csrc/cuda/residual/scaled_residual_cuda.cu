// CUDA kernels of mmo1d::scaled_residual (scaled_residual.h): out = shortcut + (branch + bias) * scale,
// and the branch's gradient grad * scale, over 4-D tensors in memory order (contiguous or
// channels_last), V elements a thread at a time with one vector access per tensor where the pointers
// and the innermost extent allow it. Each element: fmaf(branch (+ bias), scale, shortcut) in float32,
// rounded once to the output dtype. ATen's addcmul takes the broadcast scale through its strided
// kernel with a cast per element. The channels_last backward: residual_backward_kernels.cuh.
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>

#include "../../common.h"
#include "../../scaled_residual.h"
#include "../common/common.cuh"
#include "../common/cuda_context.h"
#include "residual_backward_kernels.cuh"

namespace mmo1d {
namespace {

constexpr int kResidualThreads = 256;

using cuda::Pack;

// Element e of the tensors (memory order) has channel c and image n: channels_last, c = e mod C and
// n = e / (H W C); NCHW, c = (e / (H W)) mod C and n = e / (C H W). scale holds C floats per image
// (scale_n = C) or one set for all (scale_n = 0); bias (null without one) C floats. With V > 1, V
// divides C (channels_last) or H W (NCHW), so that a pack's elements share n and (NCHW) c.
template <typename s_t, typename b_t, typename o_t, int V, bool CL>
__global__ void __launch_bounds__(kResidualThreads)
    scaled_residual_kernel(const s_t* __restrict__ shortcut, const b_t* __restrict__ branch,
                           const float* __restrict__ scale, const float* __restrict__ bias, o_t* __restrict__ out,
                           uint32_t packs, uint32_t C, uint32_t HW, uint32_t scale_n) {
  const uint32_t CHW = C * HW;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const uint32_t e = i * V;
    const uint32_t n = e / CHW;
    const float* sc = scale + n * scale_n;
    const Pack<b_t, V> b = reinterpret_cast<const Pack<b_t, V>*>(branch)[i];
    Pack<s_t, V> s;
    if (shortcut != nullptr) s = reinterpret_cast<const Pack<s_t, V>*>(shortcut)[i];
    Pack<o_t, V> o;
    const uint32_t c0 = CL ? e % C : (e / HW) % C;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float f = sc[CL ? c0 + k : c0];
      const float add = shortcut != nullptr ? static_cast<float>(s.v[k]) : 0.0f;
      float bv = static_cast<float>(b.v[k]);
      if (bias != nullptr) bv += bias[CL ? c0 + k : c0];
      o.v[k] = static_cast<o_t>(fmaf(bv, f, add));
    }
    reinterpret_cast<Pack<o_t, V>*>(out)[i] = o;
  }
}

template <typename F>
void dispatch_kernel_dtype(at::ScalarType t, F&& f) {
  cuda::dispatch_float_half_bf16(t, "scaled_residual", std::forward<F>(f));
}

// out = shortcut (when defined) + (branch + bias (when defined)) * scale, in the kernel's domain (out
// allocated by the caller, in the layout of branch).
void launch_scaled_residual(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                            const at::Tensor& bias, const at::Tensor& out) {
  const int64_t numel = branch.numel();
  if (numel == 0) return;
  const c10::cuda::CUDAGuard guard(branch.device());
  const bool cl = !branch.is_contiguous();
  const int64_t C = branch.size(1), HW = branch.size(2) * branch.size(3);
  const at::Tensor sc = scale.to(at::kFloat).contiguous();
  const at::Tensor bias_f = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  const uint32_t scale_n = scale.dim() == 4 && scale.size(0) > 1 ? static_cast<uint32_t>(C) : 0;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  dispatch_kernel_dtype(shortcut.defined() ? shortcut.scalar_type() : branch.scalar_type(), [&](auto s_v) {
    dispatch_kernel_dtype(branch.scalar_type(), [&](auto b_v) {
      dispatch_kernel_dtype(out.scalar_type(), [&](auto o_v) {
        using s_t = decltype(s_v);
        using b_t = decltype(b_v);
        using o_t = decltype(o_v);
        auto run = [&](auto v_const, auto cl_const) {
          constexpr int V = decltype(v_const)::value;
          const int64_t packs = numel / V;
          const int64_t blocks = std::min<int64_t>((packs + kResidualThreads - 1) / kResidualThreads, int64_t(sms) * 8);
          scaled_residual_kernel<s_t, b_t, o_t, V, decltype(cl_const)::value>
              <<<static_cast<unsigned>(blocks), kResidualThreads, 0, stream>>>(
                  shortcut.defined() ? shortcut.data_ptr<s_t>() : nullptr, branch.data_ptr<b_t>(),
                  sc.data_ptr<float>(), bias_f.defined() ? bias_f.data_ptr<float>() : nullptr, out.data_ptr<o_t>(),
                  static_cast<uint32_t>(packs), static_cast<uint32_t>(C), static_cast<uint32_t>(HW), scale_n);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        };
        constexpr int V = 4;
        const bool vec = (cl ? C : HW) % V == 0 && cuda::aligned_to(shortcut, V * sizeof(s_t)) &&
                         cuda::aligned_to(branch, V * sizeof(b_t)) && cuda::aligned_to(out, V * sizeof(o_t));
        if (vec) {
          cl ? run(std::integral_constant<int, V>{}, std::true_type{})
             : run(std::integral_constant<int, V>{}, std::false_type{});
        } else {
          cl ? run(std::integral_constant<int, 1>{}, std::true_type{})
             : run(std::integral_constant<int, 1>{}, std::false_type{});
        }
      });
    });
  });
}

at::Tensor forward_cuda(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                        const c10::optional<at::Tensor>& bias_opt) {
  check_scaled_residual_bias(branch, bias_opt);
  const at::Tensor bias = is_given(bias_opt) ? *bias_opt : at::Tensor();
  const at::ScalarType out_dtype = bias.defined() ? at::native::result_type({shortcut, branch, scale, bias})
                                                  : at::native::result_type({shortcut, branch, scale});
  if (!scaled_residual_in_kernel_domain(shortcut, branch, scale, bias, out_dtype)) {
    return scaled_residual_composite(shortcut, branch, scale, bias_opt);
  }
  at::Tensor out = at::empty_like(branch, branch.options().dtype(out_dtype));
  launch_scaled_residual(shortcut, branch, scale, bias, out);
  return out;
}

// The branch's, the scale's and the bias's gradients of channels_last tensors in one pass
// (residual_backward_cl_kernel and the partial sums' reductions): grad_branch, grad_scale and grad_bias
// (undefined without a bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_backward_cl(const at::Tensor& grad, const at::Tensor& branch,
                                                                 const at::Tensor& scale, const at::Tensor& bias,
                                                                 bool want_branch) {
  const c10::cuda::CUDAGuard guard(branch.device());
  const int64_t N = branch.size(0), C = branch.size(1), HW = branch.size(2) * branch.size(3);
  const at::Tensor sc = scale.to(at::kFloat).contiguous();
  const bool per_image = scale.dim() == 4 && scale.size(0) > 1;
  at::Tensor grad_branch = want_branch ? at::empty_like(branch) : at::Tensor();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  // About 8 blocks per SM, each of at least 8 rows (the partial sums stay a fraction of the tensors).
  const int64_t want_chunks = std::clamp<int64_t>((int64_t(sms) * 8 + N - 1) / N, 1, (HW + 7) / 8);
  const int64_t rows_per_chunk = (HW + want_chunks - 1) / want_chunks;
  const int64_t chunks = (HW + rows_per_chunk - 1) / rows_per_chunk;
  at::Tensor partial = at::empty({N, chunks, C}, branch.options().dtype(at::kFloat));
  const bool with_bias = bias.defined();
  const at::Tensor bias_f = with_bias ? bias.to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor partial_bias = with_bias ? at::empty_like(partial) : at::Tensor();
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_kernel_dtype(grad.scalar_type(), [&](auto g_v) {
    dispatch_kernel_dtype(branch.scalar_type(), [&](auto b_v) {
      using g_t = decltype(g_v);
      using b_t = decltype(b_v);
      auto run = [&](auto v_const, auto bias_const) {
        constexpr int V = decltype(v_const)::value;
        cuda::residual_backward_cl_kernel<g_t, b_t, V, decltype(bias_const)::value>
            <<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(N)), cuda::kResidualBwdThreads, 0, stream>>>(
                grad.data_ptr<g_t>(), branch.data_ptr<b_t>(), sc.data_ptr<float>(),
                with_bias ? bias_f.data_ptr<float>() : nullptr, want_branch ? grad_branch.data_ptr<b_t>() : nullptr,
                partial.data_ptr<float>(), with_bias ? partial_bias.data_ptr<float>() : nullptr, static_cast<int>(C),
                static_cast<int>(HW), static_cast<int>(rows_per_chunk), per_image ? static_cast<int>(C) : 0);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      };
      constexpr int V = 4;
      const bool vec = C % V == 0 && cuda::aligned_to(grad, V * sizeof(g_t)) &&
                       cuda::aligned_to(branch, V * sizeof(b_t)) && cuda::aligned_to(grad_branch, V * sizeof(b_t));
      if (vec) {
        with_bias ? run(std::integral_constant<int, V>{}, std::true_type{})
                  : run(std::integral_constant<int, V>{}, std::false_type{});
      } else {
        with_bias ? run(std::integral_constant<int, 1>{}, std::true_type{})
                  : run(std::integral_constant<int, 1>{}, std::false_type{});
      }
    });
  });
  const int64_t outputs = per_image ? N * C : C;
  at::Tensor sums = at::empty({outputs}, branch.options().dtype(at::kFloat));
  const int64_t blocks = (outputs * 32 + cuda::kResidualBwdThreads - 1) / cuda::kResidualBwdThreads;
  cuda::residual_scale_sum_kernel<<<static_cast<unsigned>(blocks), cuda::kResidualBwdThreads, 0, stream>>>(
      partial.data_ptr<float>(), sums.data_ptr<float>(), static_cast<int>(outputs), static_cast<int>(C),
      static_cast<int>(chunks), per_image ? 1 : static_cast<int>(N));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  at::Tensor grad_bias;
  if (with_bias) {
    // Every image's and chunk's sums of a channel, as the scale's without images.
    at::Tensor bias_sums = at::empty({C}, branch.options().dtype(at::kFloat));
    cuda::residual_scale_sum_kernel<<<static_cast<unsigned>((C * 32 + cuda::kResidualBwdThreads - 1) /
                                                            cuda::kResidualBwdThreads),
                                      cuda::kResidualBwdThreads, 0, stream>>>(
        partial_bias.data_ptr<float>(), bias_sums.data_ptr<float>(), static_cast<int>(C), static_cast<int>(C),
        static_cast<int>(chunks), static_cast<int>(N));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    grad_bias = bias_sums.to(bias.scalar_type());
  }
  return {grad_branch, sums.view(scale.sizes()).to(scale.scalar_type()), grad_bias};
}

ResidualGrads backward_cuda(const at::Tensor& grad, const at::Tensor& branch, const at::Tensor& scale,
                            const c10::optional<at::Tensor>& bias_opt, at::IntArrayRef shortcut_sizes,
                            std::array<bool, 4> output_mask) {
  const at::Tensor bias = is_given(bias_opt) ? *bias_opt : at::Tensor();
  // In the kernels' domain: grad and branch of one shape and layout.
  const bool domain = (output_mask[1] || output_mask[2] || output_mask[3]) && grad.sizes() == branch.sizes() &&
                      scaled_residual_in_kernel_domain(grad, branch, scale, bias, branch.scalar_type()) &&
                      grad.is_contiguous() == branch.is_contiguous();
  if (!domain) return scaled_residual_backward_composite(grad, branch, scale, bias_opt, shortcut_sizes, output_mask);
  const at::Tensor grad_shortcut = output_mask[0] ? grad.sum_to_size(shortcut_sizes) : at::Tensor();
  if (!branch.is_contiguous() && branch.size(1) <= cuda::kResidualMaxChannels && output_mask[2]) {
    // channels_last: the branch's, the scale's and the bias's gradients in one pass (the bias's
    // sums, taken with the scale's, dropped when not asked for).
    auto [grad_branch, grad_scale, grad_bias] = fused_backward_cl(grad, branch, scale, bias, output_mask[1]);
    if (!output_mask[3]) grad_bias = at::Tensor();
    return {grad_shortcut, grad_branch, grad_scale, grad_bias};
  }
  // The scale's and the bias's sums with ATen's ops; the branch's gradient with the forward's kernel.
  auto [unused_shortcut, unused_branch, grad_scale, grad_bias] = scaled_residual_backward_composite(
      grad, branch, scale, bias_opt, shortcut_sizes, {false, false, output_mask[2], output_mask[3]});
  at::Tensor grad_branch;
  if (output_mask[1]) {
    grad_branch = at::empty_like(grad, grad.options().dtype(branch.scalar_type()));
    launch_scaled_residual(at::Tensor(), grad, scale, at::Tensor(), grad_branch);
  }
  return {grad_shortcut, grad_branch, grad_scale, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("scaled_residual", &forward_cuda);
  m.impl("scaled_residual_backward", &backward_cuda);
}

}  // namespace mmo1d
