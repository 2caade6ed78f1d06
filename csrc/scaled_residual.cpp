// Schema and autograd of mmo1d::scaled_residual, the residual of the ConvNeXt blocks: shortcut +
// branch * scale (the layer scale and the drop-path factors in scale), computed as ATen's addcmul
// in the inputs' promoted dtype, never cast by autocast (no autocast kernel: the key falls through).
//
// Backward gives addcmul's gradients without the multiplications by its `value` (1 here) that
// ATen's formula makes, a full-size product each, and writes the branch's gradient in the branch's
// dtype from the product (no float32 gradient and cast): the values are those of addcmul's backward.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "op_registration.h"

namespace mmo1d {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ScaledResidualFunction : public torch::autograd::Function<ScaledResidualFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& shortcut, const at::Tensor& branch,
                            const at::Tensor& scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({branch, scale});
    ctx->saved_data["shortcut_sizes"] = shortcut.sizes().vec();
    return at::addcmul(shortcut, branch, scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& branch = saved[0];
    const at::Tensor& scale = saved[1];
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor grad_shortcut, grad_branch, grad_scale;
    if (ctx->needs_input_grad(0)) grad_shortcut = grad.sum_to_size(ctx->saved_data["shortcut_sizes"].toIntVector());
    if (ctx->needs_input_grad(1)) {
      if (branch.sizes() == grad.sizes() && !at::GradMode::is_enabled()) {
        // The product rounded once, to the branch's dtype (an out= op has no derivative: not when
        // backward itself is differentiated).
        grad_branch = at::empty_like(branch);
        at::mul_out(grad_branch, grad, scale);
      } else {
        grad_branch = at::mul(grad, scale).sum_to_size(branch.sizes());
      }
    }
    if (ctx->needs_input_grad(2)) grad_scale = at::mul(grad, branch).sum_to_size(scale.sizes());
    return {grad_shortcut, grad_branch, grad_scale};
  }
};

at::Tensor forward_autograd(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale) {
  return ScaledResidualFunction::apply(shortcut, branch, scale);
}

// Without autograd (inference tensors).
at::Tensor forward_plain(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale) {
  return at::addcmul(shortcut, branch, scale);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  def_with_autograd(m, "scaled_residual(Tensor shortcut, Tensor branch, Tensor scale) -> Tensor", forward_autograd);
  m.impl("scaled_residual", torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd, &forward_plain));
}

}  // namespace mmo1d
