// Schema, autograd and autocast policy of the interpolated oriented convolution
// (rounding 'bilinear' or 'gaussian', interp.h): the rounded op's arguments plus the band's sigma
// and radius, and gradients for the angles too. Device kernels live in cpu/ and cuda/.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "interp.h"
#include "oriented_dwconv1d.h"

namespace mmo1d {

namespace {

using ForwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&,
                             int64_t, c10::string_view, double, double, bool);

c10::TypedOperatorHandle<ForwardFn> forward_op() {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("mmo1d::oriented_dwconv1d_interp", "").typed<ForwardFn>();
  return op;
}

// Under autocast the op runs in the autocast dtype, like conv2d; theta is never cast.
template <c10::DispatchKey autocast_key, c10::DeviceType device_type>
at::Tensor forward_autocast(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                            double sigma, double radius, bool residual) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  const auto dtype = at::autocast::get_autocast_dtype(device_type);
  c10::optional<at::Tensor> cast_bias;
  if (bias.has_value() && bias->defined()) cast_bias = at::autocast::cached_cast(dtype, *bias, device_type);
  return forward_op().call(at::autocast::cached_cast(dtype, input, device_type),
                           at::autocast::cached_cast(dtype, weight, device_type), theta, cast_bias, stride, rounding,
                           sigma, radius, residual);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class InterpFunction : public torch::autograd::Function<InterpFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& theta, const c10::optional<at::Tensor>& bias, int64_t stride,
                            c10::string_view rounding, double sigma, double radius, bool residual) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({input, weight, theta});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["rounding"] = std::string(rounding);
    ctx->saved_data["sigma"] = sigma;
    ctx->saved_data["radius"] = radius;
    ctx->saved_data["residual"] = residual;
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return forward_op().call(input, weight, theta, bias, stride, rounding, sigma, radius, residual);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static auto input_op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("mmo1d::oriented_dwconv1d_interp_backward_input", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                 const at::Tensor&, int64_t, c10::string_view, double, double, bool)>();
    static auto params_op = c10::Dispatcher::singleton()
                                .findSchemaOrThrow("mmo1d::oriented_dwconv1d_interp_backward_params", "")
                                .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                                    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                                    c10::string_view, double, double, bool)>();
    const auto saved = ctx->get_saved_variables();
    const auto& grad = grad_outputs[0];
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const std::string rounding = ctx->saved_data["rounding"].toStringRef();
    const double sigma = ctx->saved_data["sigma"].toDouble(), radius = ctx->saved_data["radius"].toDouble();
    at::Tensor grad_input, grad_weight, grad_theta, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_input = input_op.call(grad, saved[0], saved[1], saved[2], stride, rounding, sigma, radius,
                                 ctx->saved_data["residual"].toBool());
    }
    const bool bias_needed = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3);
    const bool theta_needed = ctx->needs_input_grad(2);
    if (ctx->needs_input_grad(1) || theta_needed) {
      at::Tensor db;
      std::tie(grad_weight, grad_theta, db) =
          params_op.call(grad, saved[0], saved[1], saved[2], stride, rounding, sigma, radius, theta_needed);
      if (!ctx->needs_input_grad(1)) grad_weight = at::Tensor();
      if (!theta_needed) grad_theta = at::Tensor();
      if (bias_needed) grad_bias = db;
    } else if (bias_needed) {
      grad_bias = bias_grad(grad);
    }
    return {grad_input,   grad_weight,  grad_theta,   grad_bias,   at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor forward_autograd(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                            double sigma, double radius, bool residual) {
  return InterpFunction::apply(input, weight, theta, bias, stride, rounding, sigma, radius, residual);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def(
      "oriented_dwconv1d_interp(Tensor input, Tensor weight, Tensor theta, Tensor? bias, int stride, str rounding, "
      "float sigma, float radius, bool residual) -> Tensor");
  m.def(
      "oriented_dwconv1d_interp_backward_input(Tensor grad_output, Tensor input, Tensor weight, Tensor theta, "
      "int stride, str rounding, float sigma, float radius, bool residual) -> Tensor");
  // The weight, angle and bias gradients in one call: the first two come from the same sums of
  // grad_output * x at every sampled offset. The angle's is computed only when need_theta (else it
  // has no values).
  m.def(
      "oriented_dwconv1d_interp_backward_params(Tensor grad_output, Tensor input, Tensor weight, Tensor theta, "
      "int stride, str rounding, float sigma, float radius, bool need_theta) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, Autograd, m) {
  m.impl("oriented_dwconv1d_interp", forward_autograd);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCPU, m) {
  m.impl("oriented_dwconv1d_interp", forward_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCUDA, m) {
  m.impl("oriented_dwconv1d_interp", forward_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

}  // namespace mmo1d
