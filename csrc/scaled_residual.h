// mmo1d::scaled_residual, the residual of the ConvNeXt blocks: shortcut + (branch + bias) * scale, with
// the layer scale and the drop-path factors in `scale` (C, 1, 1), (1, C, 1, 1) or (N, C, 1, 1) and an
// optional per-channel `bias` (C,) (the bias of the Linear that makes the branch), computed in float32
// and written in the promoted dtype of the inputs (as torch.addcmul, never cast by autocast). Its
// backward op gives the gradients of shortcut, branch, scale and bias for an output mask; the branch's
// gradient is written in the branch's dtype, the bias's is the float32 sum of grad * scale.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

namespace mmo1d {

using ResidualGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// Whether the CUDA kernel takes `branch` (plus `bias`, when defined) scaled by `scale` (and added to
// `shortcut`, when defined): 4-D tensors of one shape in one layout (contiguous or channels_last),
// float32 / float16 / bfloat16, the scale's shape one of the above, a floating (C,) bias, and an
// output dtype among those three. Elsewhere the op is torch.addcmul's kernels.
bool scaled_residual_in_kernel_domain(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                      const at::Tensor& bias, at::ScalarType out_dtype);

// A clear error for a bias that is not a floating (C,) tensor on the branch's device.
void check_scaled_residual_bias(const at::Tensor& branch, const c10::optional<at::Tensor>& bias);

// The op with ATen's ops (the CPU kernel, and the CUDA one outside the kernel's domain): addcmul on the
// biased branch, in the promoted dtype of the four.
at::Tensor scaled_residual_composite(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                     const c10::optional<at::Tensor>& bias);

// The backward of scaled_residual with ATen's ops (the CPU kernel, and the CUDA one outside the
// kernel's domain): grad summed to the shortcut's shape, grad * scale in the branch's dtype summed to
// the branch's shape, grad * (branch + bias) summed to the scale's shape, and grad * scale summed over
// every dim but 1 in the bias's dtype.
ResidualGrads scaled_residual_backward_composite(const at::Tensor& grad, const at::Tensor& branch,
                                                 const at::Tensor& scale, const c10::optional<at::Tensor>& bias,
                                                 at::IntArrayRef shortcut_sizes, std::array<bool, 4> output_mask);

}  // namespace mmo1d
