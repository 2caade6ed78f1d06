// mmo1d::scaled_residual, the residual of the ConvNeXt blocks: shortcut + branch * scale, with the
// layer scale and the drop-path factors in `scale` (C, 1, 1), (1, C, 1, 1) or (N, C, 1, 1), computed
// in float32 and written in the promoted dtype of the three (as torch.addcmul, never cast by autocast).
// Its backward op gives the gradients of shortcut, branch and scale for an output mask; the branch's
// gradient is written in the branch's dtype.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <tuple>

namespace mmo1d {

// Whether the CUDA kernel takes `branch` scaled by `scale` (and added to `shortcut`, when defined):
// 4-D tensors of one shape in one layout (contiguous or channels_last), float32 / float16 / bfloat16,
// the scale's shape one of the above, and an output dtype among those three. Elsewhere the op is
// torch.addcmul's kernels.
bool scaled_residual_in_kernel_domain(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                      at::ScalarType out_dtype);

// The backward of scaled_residual with ATen's ops (the CPU kernel, and the CUDA one outside the
// kernel's domain): grad summed to the shortcut's shape, grad * scale in the branch's dtype summed to
// the branch's shape, and (grad * branch) summed to the scale's shape.
std::tuple<at::Tensor, at::Tensor, at::Tensor> scaled_residual_backward_composite(
    const at::Tensor& grad, const at::Tensor& branch, const at::Tensor& scale, at::IntArrayRef shortcut_sizes,
    std::array<bool, 3> output_mask);

}  // namespace mmo1d
