// Schema and CPU kernel of mmo1d::gelu_and_grad (gelu_and_grad.h); the CUDA kernels live in
// cuda/gelu/gelu_and_grad_cuda.cu. No autograd kernel: the op runs inside oriented_dwconv1d_gelu.
#include "gelu_and_grad.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "common.h"

namespace mmo1d {

void check_gelu_and_grad_args(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                              const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(at::isFloatingType(pre.scalar_type()), "gelu_and_grad: pre must be floating point, got ",
              pre.scalar_type());
  if (is_given(grad)) {
    TORCH_CHECK(grad->sizes() == pre.sizes() && grad->scalar_type() == pre.scalar_type() &&
                    grad->device() == pre.device(),
                "gelu_and_grad: grad must have pre's shape, dtype and device, got ", shape_str(*grad), " ",
                grad->scalar_type(), " on ", grad->device(), " for ", shape_str(pre), " ", pre.scalar_type(), " on ",
                pre.device());
  }
  if (is_given(bias)) {
    TORCH_CHECK(pre.dim() >= 2, "gelu_and_grad: a bias needs pre of 2 or more dims (channels in dim 1), got ",
                shape_str(pre));
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == pre.size(1) && at::isFloatingType(bias->scalar_type()) &&
                    bias->device() == pre.device(),
                "gelu_and_grad: bias must be a floating-point (C,) tensor on pre's device with C = ",
                std::to_string(pre.size(1)), ", got ", shape_str(*bias), " ", bias->scalar_type(), " on ",
                bias->device());
  }
}

bool gelu_and_grad_in_kernel_domain(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                                    const c10::optional<at::Tensor>& bias) {
  const at::ScalarType t = pre.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return false;
  if (!pre.is_non_overlapping_and_dense() || pre.numel() >= (int64_t(1) << 31)) return false;
  if (is_given(grad) && grad->strides() != pre.strides()) return false;
  if (!is_given(bias)) return is_given(grad);
  const int64_t pack = 16 / static_cast<int64_t>(pre.element_size());
  return pre.dim() == 4 && pre.is_contiguous(at::MemoryFormat::ChannelsLast) && pre.size(1) % pack == 0;
}

GeluAndGrad gelu_and_grad_composite(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                                    const c10::optional<at::Tensor>& bias) {
  const at::Tensor none = at::empty({0}, pre.options());
  if (!is_given(bias)) {
    return {at::gelu(pre), is_given(grad) ? at::gelu_backward(*grad, pre) : none, none};
  }
  const at::ScalarType opmath = accumulation_type(pre.scalar_type());
  const at::Tensor x = pre.to(opmath) + bias->to(opmath).view(channel_shape(pre));
  at::Tensor h = at::gelu(x).to(pre.scalar_type());
  if (!is_given(grad)) return {h, none, at::empty({0}, bias->options())};
  at::Tensor dpre = at::gelu_backward(grad->to(opmath), x).to(pre.scalar_type());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < pre.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  at::Tensor dbias = dpre.sum(dims, /*keepdim=*/false, opmath).to(bias->scalar_type());
  return {h, dpre, dbias};
}

namespace {

GeluAndGrad gelu_and_grad_cpu(const at::Tensor& pre, const c10::optional<at::Tensor>& grad,
                              const c10::optional<at::Tensor>& bias) {
  check_gelu_and_grad_args(pre, grad, bias);
  return gelu_and_grad_composite(pre, grad, bias);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def("gelu_and_grad(Tensor pre, Tensor? grad, Tensor? bias=None) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("gelu_and_grad", &gelu_and_grad_cpu);
}

}  // namespace mmo1d
