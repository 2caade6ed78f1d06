// mmo1d::gelu_and_grad(pre, grad) -> (gelu(pre), gelu_backward(grad, pre)): the exact GELU of pre and
// GELU's gradient at pre of `grad`, in one pass over pre. The backward of oriented_dwconv1d_gelu needs
// both (the GELU output again for the weight gradient, GELU's gradient of the input gradient); the
// values are bit for bit those of at::gelu and at::gelu_backward.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace mmo1d {

// Whether the CUDA kernel takes the call: pre and grad of one shape, dtype (float32, float16 or
// bfloat16) and strides, non-overlapping and dense (any memory order), fewer than 2^31 elements.
// Elsewhere the op is at::gelu and at::gelu_backward.
bool gelu_and_grad_in_kernel_domain(const at::Tensor& pre, const at::Tensor& grad);

std::tuple<at::Tensor, at::Tensor> gelu_and_grad_composite(const at::Tensor& pre, const at::Tensor& grad);

}  // namespace mmo1d
