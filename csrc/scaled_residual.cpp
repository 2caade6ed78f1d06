// Schema, autograd and CPU kernels of mmo1d::scaled_residual (scaled_residual.h); the CUDA kernel
// lives in cuda/residual/scaled_residual_cuda.cu. No autocast kernel: the key falls through, so a
// low-precision branch is read as it is.
#include "scaled_residual.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include "op_registration.h"

namespace mmo1d {

bool scaled_residual_in_kernel_domain(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                      at::ScalarType out_dtype) {
  auto kernel_dtype = [](at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; };
  if (branch.dim() != 4 || !kernel_dtype(branch.scalar_type()) || !kernel_dtype(out_dtype)) return false;
  if (!at::isFloatingType(scale.scalar_type()) || branch.numel() >= (int64_t(1) << 31)) return false;
  const bool nchw = branch.is_contiguous();
  if (!nchw && !branch.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  if (shortcut.defined()) {
    if (shortcut.sizes() != branch.sizes() || !kernel_dtype(shortcut.scalar_type())) return false;
    if (nchw ? !shortcut.is_contiguous() : !shortcut.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  }
  // scale: (C, 1, 1), (1, C, 1, 1) or (N, C, 1, 1).
  if (scale.dim() < 3 || scale.dim() > 4) return false;
  const int64_t sn = scale.dim() == 4 ? scale.size(0) : 1;
  return (sn == 1 || sn == branch.size(0)) && scale.size(-3) == branch.size(1) && scale.size(-2) == 1 &&
         scale.size(-1) == 1;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> scaled_residual_backward_composite(
    const at::Tensor& grad, const at::Tensor& branch, const at::Tensor& scale, at::IntArrayRef shortcut_sizes,
    std::array<bool, 3> output_mask) {
  at::Tensor grad_shortcut, grad_branch, grad_scale;
  if (output_mask[0]) grad_shortcut = grad.sum_to_size(shortcut_sizes);
  if (output_mask[1]) {
    if (branch.sizes() == grad.sizes()) {
      // The product rounded once, to the branch's dtype.
      grad_branch = at::empty_like(branch);
      at::mul_out(grad_branch, grad, scale);
    } else {
      grad_branch = at::mul(grad, scale).sum_to_size(branch.sizes()).to(branch.scalar_type());
    }
  }
  if (output_mask[2]) grad_scale = at::mul(grad, branch).sum_to_size(scale.sizes()).to(scale.scalar_type());
  return {grad_shortcut, grad_branch, grad_scale};
}

namespace {

at::Tensor forward_cpu(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale) {
  return at::addcmul(shortcut, branch, scale);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_cpu(const at::Tensor& grad, const at::Tensor& branch,
                                                            const at::Tensor& scale, at::IntArrayRef shortcut_sizes,
                                                            std::array<bool, 3> output_mask) {
  return scaled_residual_backward_composite(grad, branch, scale, shortcut_sizes, output_mask);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ScaledResidualFunction : public torch::autograd::Function<ScaledResidualFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& shortcut, const at::Tensor& branch,
                            const at::Tensor& scale) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmo1d::scaled_residual", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({branch, scale});
    ctx->saved_data["shortcut_sizes"] = shortcut.sizes().vec();
    return op.call(shortcut, branch, scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmo1d::scaled_residual_backward", "")
                         .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                             const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef,
                             std::array<bool, 3>)>();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& branch = saved[0];
    const at::Tensor& scale = saved[1];
    const at::Tensor& grad = grad_outputs[0];
    const std::vector<int64_t> sizes = ctx->saved_data["shortcut_sizes"].toIntVector();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    if (at::GradMode::is_enabled()) {
      // Backward differentiated (higher-order gradients): ATen's differentiable ops.
      return {mask[0] ? grad.sum_to_size(sizes) : at::Tensor(),
              mask[1] ? at::mul(grad, scale).sum_to_size(branch.sizes()).to(branch.scalar_type()) : at::Tensor(),
              mask[2] ? at::mul(grad, branch).sum_to_size(scale.sizes()).to(scale.scalar_type()) : at::Tensor()};
    }
    const BelowAutogradWithoutGraph below_autograd;
    auto [grad_shortcut, grad_branch, grad_scale] = op.call(grad, branch, scale, sizes, mask);
    return {grad_shortcut, grad_branch, grad_scale};
  }
};

at::Tensor forward_autograd(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale) {
  return ScaledResidualFunction::apply(shortcut, branch, scale);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  def_with_autograd(m, "scaled_residual(Tensor shortcut, Tensor branch, Tensor scale) -> Tensor", forward_autograd);
  m.def(
      "scaled_residual_backward(Tensor grad, Tensor branch, Tensor scale, int[] shortcut_sizes, "
      "bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("scaled_residual", &forward_cpu);
  m.impl("scaled_residual_backward", &backward_cpu);
}

}  // namespace mmo1d
