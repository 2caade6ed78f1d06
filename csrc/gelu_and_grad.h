// mmo1d::gelu_and_grad(pre, grad?, bias?) -> (h, dpre, dbias): the exact GELU of x = pre (+ bias along
// dim 1) and, given grad, GELU's gradient at x of grad and the bias's gradient (dpre summed over every
// dim but 1), in one pass over pre. The backward of oriented_dwconv1d_gelu needs them (the GELU output
// again for the weight gradient, GELU's gradient of the input gradient, the gradient of the bias of the
// Linear before it); its forward, given a bias, the GELU output. Without a bias the values are bit for bit
// those of at::gelu and at::gelu_backward; with one, those of the same two ops on the float32 sum
// pre + bias (float64 for a float64 pre), rounded to pre's dtype. dpre is empty without grad, dbias
// without grad or bias; dbias is in bias's dtype, summed in float32 (float64) from dpre as rounded.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmo1d {

using GeluAndGrad = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// Whether the CUDA kernels take the call. Without a bias: pre and grad of one shape, dtype (float32,
// float16 or bfloat16) and strides, non-overlapping and dense (any memory order), fewer than 2^31
// elements. With one: also 4-D channels_last rows whose channel count is a multiple of the 16-byte
// pack, 16-byte aligned. Elsewhere the op is the composite of ATen's ops.
bool gelu_and_grad_in_kernel_domain(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                                    const c10::optional<at::Tensor>& bias);

// Checks the arguments' shapes and devices (a clear error for a bad call).
void check_gelu_and_grad_args(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                              const c10::optional<at::Tensor>& bias);

GeluAndGrad gelu_and_grad_composite(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                                    const c10::optional<at::Tensor>& bias);

}  // namespace mmo1d
