// Schema, autograd and CPU kernels of mmo1d::scaled_residual (scaled_residual.h); the CUDA kernel
// lives in cuda/residual/scaled_residual_cuda.cu. No autocast kernel: the key falls through, so a
// low-precision branch is read as it is.
#include "scaled_residual.h"

#include <ATen/native/TypeProperties.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/promote_types.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

#include "common.h"
#include "op_registration.h"

namespace mmo1d {

void check_scaled_residual_bias(const at::Tensor& branch, const c10::optional<at::Tensor>& bias) {
  if (!is_given(bias)) return;
  TORCH_CHECK(branch.dim() >= 2 && bias->dim() == 1 && bias->size(0) == branch.size(1) &&
                  at::isFloatingType(bias->scalar_type()) && bias->device() == branch.device(),
              "scaled_residual: bias must be a floating-point (C,) tensor on the branch's device, C = the "
              "branch's dim 1 (",
              branch.dim() >= 2 ? std::to_string(branch.size(1)) : "none", "), got ", shape_str(*bias), " ",
              bias->scalar_type(), " on ",
              bias->device());
}

bool scaled_residual_in_kernel_domain(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                      const at::Tensor& bias, at::ScalarType out_dtype) {
  auto kernel_dtype = [](at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; };
  if (branch.dim() != 4 || !kernel_dtype(branch.scalar_type()) || !kernel_dtype(out_dtype)) return false;
  if (!at::isFloatingType(scale.scalar_type()) || branch.numel() >= (int64_t(1) << 31)) return false;
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != branch.size(1))) return false;
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

namespace {

// branch + bias along dim 1 in float32 (float64 if either is float64; branch itself without a bias):
// ATen's form of the term that scale multiplies.
at::Tensor biased_branch(const at::Tensor& branch, const c10::optional<at::Tensor>& bias) {
  if (!is_given(bias)) return branch;
  const at::ScalarType opmath = accumulation_type(at::promote_types(branch.scalar_type(), bias->scalar_type()));
  return at::add(branch.to(opmath), bias->to(opmath).view(channel_shape(branch)));
}

}  // namespace

at::Tensor scaled_residual_composite(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                                     const c10::optional<at::Tensor>& bias) {
  if (!is_given(bias)) return at::addcmul(shortcut, branch, scale);
  const at::ScalarType out_dtype = at::native::result_type({shortcut, branch, scale, *bias});
  return at::addcmul(shortcut, biased_branch(branch, bias), scale).to(out_dtype);
}

ResidualGrads scaled_residual_backward_composite(const at::Tensor& grad, const at::Tensor& branch,
                                                 const at::Tensor& scale, const c10::optional<at::Tensor>& bias,
                                                 at::IntArrayRef shortcut_sizes, std::array<bool, 4> output_mask) {
  at::Tensor grad_shortcut, grad_branch, grad_scale, grad_bias;
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
  if (output_mask[2]) {
    grad_scale = at::mul(grad, biased_branch(branch, bias)).sum_to_size(scale.sizes()).to(scale.scalar_type());
  }
  if (output_mask[3] && is_given(bias)) {
    const at::Tensor per_channel = at::mul(grad, scale).sum_to_size(channel_shape(branch));
    grad_bias = per_channel.view({bias->size(0)}).to(bias->scalar_type());
  }
  return {grad_shortcut, grad_branch, grad_scale, grad_bias};
}

namespace {

at::Tensor forward_cpu(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                       const c10::optional<at::Tensor>& bias) {
  check_scaled_residual_bias(branch, bias);
  return scaled_residual_composite(shortcut, branch, scale, bias);
}

ResidualGrads backward_cpu(const at::Tensor& grad, const at::Tensor& branch, const at::Tensor& scale,
                           const c10::optional<at::Tensor>& bias, at::IntArrayRef shortcut_sizes,
                           std::array<bool, 4> output_mask) {
  return scaled_residual_backward_composite(grad, branch, scale, bias, shortcut_sizes, output_mask);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ForwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&);
using BackwardFn = ResidualGrads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const c10::optional<at::Tensor>&, at::IntArrayRef, std::array<bool, 4>);

class ScaledResidualFunction : public torch::autograd::Function<ScaledResidualFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& shortcut, const at::Tensor& branch,
                            const at::Tensor& scale, const c10::optional<at::Tensor>& bias) {
    static auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("mmo1d::scaled_residual", "").typed<ForwardFn>();
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({branch, scale, is_given(bias) ? *bias : at::Tensor()});
    ctx->saved_data["shortcut_sizes"] = shortcut.sizes().vec();
    return op.call(shortcut, branch, scale, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("mmo1d::scaled_residual_backward", "").typed<BackwardFn>();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& branch = saved[0];
    const at::Tensor& scale = saved[1];
    const c10::optional<at::Tensor> bias = saved[2].defined() ? c10::optional<at::Tensor>(saved[2]) : c10::nullopt;
    const at::Tensor& grad = grad_outputs[0];
    const std::vector<int64_t> sizes = ctx->saved_data["shortcut_sizes"].toIntVector();
    // needs_input_grad counts the tensors given: shortcut, branch, scale, then the bias where given.
    const std::array<bool, 4> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2),
                                      bias.has_value() && ctx->needs_input_grad(3)};
    if (at::GradMode::is_enabled()) {
      // Backward differentiated (higher-order gradients): ATen's differentiable ops.
      at::Tensor grad_bias;
      if (mask[3]) grad_bias = at::mul(grad, scale).sum_to_size(channel_shape(branch)).view({branch.size(1)});
      return {mask[0] ? grad.sum_to_size(sizes) : at::Tensor(),
              mask[1] ? at::mul(grad, scale).sum_to_size(branch.sizes()).to(branch.scalar_type()) : at::Tensor(),
              mask[2] ? at::mul(grad, biased_branch(branch, bias)).sum_to_size(scale.sizes()).to(scale.scalar_type())
                      : at::Tensor(),
              mask[3] ? grad_bias.to(bias->scalar_type()) : at::Tensor()};
    }
    const BelowAutogradWithoutGraph below_autograd;
    auto [grad_shortcut, grad_branch, grad_scale, grad_bias] = op.call(grad, branch, scale, bias, sizes, mask);
    return {grad_shortcut, grad_branch, grad_scale, grad_bias};
  }
};

at::Tensor forward_autograd(const at::Tensor& shortcut, const at::Tensor& branch, const at::Tensor& scale,
                            const c10::optional<at::Tensor>& bias) {
  return ScaledResidualFunction::apply(shortcut, branch, scale, bias);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  def_with_autograd(m, "scaled_residual(Tensor shortcut, Tensor branch, Tensor scale, Tensor? bias=None) -> Tensor",
                    forward_autograd);
  m.def(
      "scaled_residual_backward(Tensor grad, Tensor branch, Tensor scale, Tensor? bias, int[] shortcut_sizes, "
      "bool[4] output_mask) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("scaled_residual", &forward_cpu);
  m.impl("scaled_residual_backward", &backward_cpu);
}

}  // namespace mmo1d
