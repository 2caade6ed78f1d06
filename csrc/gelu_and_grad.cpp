// Schema and CPU kernel of mmo1d::gelu_and_grad (gelu_and_grad.h); the CUDA kernel lives in
// cuda/gelu/gelu_and_grad_cuda.cu. No autograd kernel: the op runs inside a backward.
#include "gelu_and_grad.h"

#include <torch/library.h>

namespace mmo1d {

bool gelu_and_grad_in_kernel_domain(const at::Tensor& pre, const at::Tensor& grad) {
  const at::ScalarType t = pre.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return false;
  return grad.scalar_type() == t && grad.device() == pre.device() && grad.sizes() == pre.sizes() &&
         grad.strides() == pre.strides() && pre.is_non_overlapping_and_dense() && pre.numel() < (int64_t(1) << 31);
}

std::tuple<at::Tensor, at::Tensor> gelu_and_grad_composite(const at::Tensor& pre, const at::Tensor& grad) {
  return {at::gelu(pre), at::gelu_backward(grad, pre)};
}

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def("gelu_and_grad(Tensor pre, Tensor grad) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("gelu_and_grad", &gelu_and_grad_composite);
}

}  // namespace mmo1d
