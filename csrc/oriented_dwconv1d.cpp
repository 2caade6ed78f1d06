// Schema, autograd and autocast policy of the mmo1d oriented depthwise 1D convolution.
// Device kernels live in cpu/ and cuda/ and register themselves for their dispatch keys.
#include "oriented_dwconv1d.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/library.h>

namespace mmo1d {

namespace {

// Under autocast the op runs in the autocast dtype, like conv2d; theta is never cast (offsets are
// always computed from float32 angles).
template <c10::DispatchKey autocast_key, c10::DeviceType device_type>
at::Tensor forward_autocast(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  const auto dtype = at::autocast::get_autocast_dtype(device_type);
  c10::optional<at::Tensor> cast_bias;
  if (bias.has_value() && bias->defined()) {
    cast_bias = at::autocast::cached_cast(dtype, *bias, device_type);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmo1d::oriented_dwconv1d", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const c10::optional<at::Tensor>&, int64_t, bool, bool)>();
  return op.call(at::autocast::cached_cast(dtype, input, device_type),
                 at::autocast::cached_cast(dtype, weight, device_type), theta, cast_bias, stride, floor_rounding,
                 residual);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Autograd in C++: the op's gradients for input, weight and bias (theta is a constant). Kept out of
// Python so that a call costs no more host time than an ATen convolution's.
class OrientedDWConv1dFunction : public torch::autograd::Function<OrientedDWConv1dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& theta, const c10::optional<at::Tensor>& bias, int64_t stride,
                            bool floor_rounding, bool residual) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmo1d::oriented_dwconv1d", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const c10::optional<at::Tensor>&, int64_t, bool, bool)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({input, weight, theta});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["floor_rounding"] = floor_rounding;
    ctx->saved_data["residual"] = residual;
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return op.call(input, weight, theta, bias, stride, floor_rounding, residual);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static auto input_op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("mmo1d::oriented_dwconv1d_backward_input", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                 const at::Tensor&, int64_t, bool, bool)>();
    static auto weight_op = c10::Dispatcher::singleton()
                                .findSchemaOrThrow("mmo1d::oriented_dwconv1d_backward_weight", "")
                                .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                  const at::Tensor&, int64_t, bool)>();
    static auto params_op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("mmo1d::oriented_dwconv1d_backward_weight_bias", "")
            .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                      const at::Tensor&, int64_t, bool)>();
    const auto saved = ctx->get_saved_variables();
    const auto& grad = grad_outputs[0];
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const bool floor_rounding = ctx->saved_data["floor_rounding"].toBool();
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_input = input_op.call(grad, saved[0], saved[1], saved[2], stride, floor_rounding,
                                 ctx->saved_data["residual"].toBool());
    }
    // Tensor inputs in order: input, weight, theta, then bias when given.
    const bool bias_needed = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3);
    if (ctx->needs_input_grad(1) && bias_needed) {
      std::tie(grad_weight, grad_bias) = params_op.call(grad, saved[0], saved[1], saved[2], stride, floor_rounding);
    } else if (ctx->needs_input_grad(1)) {
      grad_weight = weight_op.call(grad, saved[0], saved[1], saved[2], stride, floor_rounding);
    } else if (bias_needed) {
      grad_bias = bias_grad(grad);
    }
    return {grad_input, grad_weight, at::Tensor(), grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor forward_autograd(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  return OrientedDWConv1dFunction::apply(input, weight, theta, bias, stride, floor_rounding, residual);
}

}  // namespace

TORCH_LIBRARY(mmo1d, m) {
  m.def(
      "oriented_dwconv1d(Tensor input, Tensor weight, Tensor theta, Tensor? bias, int stride, "
      "bool floor_rounding, bool residual) -> Tensor");
  m.def(
      "oriented_dwconv1d_backward_input(Tensor grad_output, Tensor input, Tensor weight, "
      "Tensor theta, int stride, bool floor_rounding, bool residual) -> Tensor");
  m.def(
      "oriented_dwconv1d_backward_weight(Tensor grad_output, Tensor input, Tensor weight, "
      "Tensor theta, int stride, bool floor_rounding) -> Tensor");
  // Weight and bias gradients in one call: on CUDA's channels_last paths the bias gradient is summed
  // by the weight-gradient kernel, which reads grad_output anyway.
  m.def(
      "oriented_dwconv1d_backward_weight_bias(Tensor grad_output, Tensor input, Tensor weight, "
      "Tensor theta, int stride, bool floor_rounding) -> (Tensor, Tensor)");
  // The kernel path a call takes on input's device ("forward", "backward_input" or
  // "backward_weight") with a rounding of either op ('trunc', 'floor', 'bilinear', 'gaussian' with
  // this radius): a debugging and testing aid, see mmo1d.ops.oriented_dwconv1d_path.
  m.def(
      "oriented_dwconv1d_path(Tensor input, Tensor weight, Tensor theta, int stride, str rounding, float radius, "
      "str direction) -> str");
}

namespace {

// Every backend without a kernel of its own for the weight and bias gradients: the weight-gradient
// op, then the sum of grad_output.
std::tuple<at::Tensor, at::Tensor> backward_weight_bias_composite(const at::Tensor& grad_output,
                                                                  const at::Tensor& input, const at::Tensor& weight,
                                                                  const at::Tensor& theta, int64_t stride,
                                                                  bool floor_rounding) {
  static auto weight_op = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("mmo1d::oriented_dwconv1d_backward_weight", "")
                              .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                const at::Tensor&, int64_t, bool)>();
  at::Tensor grad_weight = weight_op.call(grad_output, input, weight, theta, stride, floor_rounding);
  return {grad_weight, bias_grad(grad_output)};
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CompositeExplicitAutograd, m) {
  m.impl("oriented_dwconv1d_backward_weight_bias", backward_weight_bias_composite);
}

TORCH_LIBRARY_IMPL(mmo1d, Autograd, m) {
  m.impl("oriented_dwconv1d", forward_autograd);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCPU, m) {
  m.impl("oriented_dwconv1d", forward_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCUDA, m) {
  m.impl("oriented_dwconv1d", forward_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

}  // namespace mmo1d
