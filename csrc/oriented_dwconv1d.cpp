// Schema, autograd and autocast policy of the mmo1d oriented depthwise 1D convolution, and of its
// form on a GELU's output that keeps only the GELU's input for backward (the "++" blocks).
// Device kernels live in cpu/ and cuda/ and register themselves for their dispatch keys.
//
// One op serves every tap rule (tap_rule.h), taken as (rounding, sigma, radius): the rounded rules
// ('trunc', 'floor') give the input, weight and bias gradients; the interpolated ones ('bilinear',
// 'gaussian') also the angles' gradient.
#include "oriented_dwconv1d.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/gelu.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "gelu_and_grad.h"
#include "kept_tables.h"
#include "op_registration.h"

namespace mmo1d {

namespace {

using ForwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&,
                             int64_t, c10::string_view, double, double, bool);
using GeluForwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const c10::optional<at::Tensor>&, int64_t, c10::string_view, double, double, bool,
                                 const c10::optional<at::Tensor>&);
using GeluAndGradFn = GeluAndGrad(const at::Tensor&, const c10::optional<at::Tensor>&,
                                  const c10::optional<at::Tensor>&);
using BackwardInputFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                                   c10::string_view, double, double, bool);
using BackwardParamsFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                        const at::Tensor&, const at::Tensor&, int64_t,
                                                                        c10::string_view, double, double, bool, bool);

template <typename Fn>
c10::TypedOperatorHandle<Fn> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Fn>();
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Arguments of the Functions' forward after ctx: one gradient (or none) each; the GELU form's pre_bias
// is the one after residual. (needs_input_grad counts the tensors given only: input, weight, theta, then
// bias and pre_bias where given.)
constexpr size_t kForwardArgs = 12;
constexpr size_t kPreBiasArg = 9;

// The op's input gradient (undefined when not needed). It reads only the shape, dtype and layout of
// `input`.
at::Tensor conv_input_grad(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& input,
                           const at::Tensor& weight, const at::Tensor& theta, bool needed) {
  static auto input_op = find_op<BackwardInputFn>("mmo1d::oriented_dwconv1d_backward_input");
  if (!needed) return at::Tensor();
  const BelowAutogradWithoutGraph below_autograd;
  return input_op.call(grad, input, weight, theta, ctx->saved_data["stride"].toInt(),
                       ctx->saved_data["rounding"].toStringRef(), ctx->saved_data["sigma"].toDouble(),
                       ctx->saved_data["radius"].toDouble(), ctx->saved_data["residual"].toBool());
}

// The gradients of the op's tensor inputs in order (input, weight, theta, then bias when given):
// grad_input as given, the others at `input`. Rounded taps give the angles no gradient (the output is
// piecewise constant in them).
variable_list conv_params_grads(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& input,
                                const at::Tensor& weight, const at::Tensor& theta, const at::Tensor& grad_input) {
  static auto params_op = find_op<BackwardParamsFn>("mmo1d::oriented_dwconv1d_backward_params");
  const BelowAutogradWithoutGraph below_autograd;
  const int64_t stride = ctx->saved_data["stride"].toInt();
  const std::string rounding = ctx->saved_data["rounding"].toStringRef();
  const double sigma = ctx->saved_data["sigma"].toDouble(), radius = ctx->saved_data["radius"].toDouble();
  at::Tensor grad_weight, grad_theta, grad_bias;
  const bool bias_needed = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3);
  const bool theta_needed = ctx->needs_input_grad(2) && parse_tap_rule(rounding, sigma, radius).interpolated();
  if (ctx->needs_input_grad(1) || theta_needed) {
    at::Tensor dw, dtheta, db;
    std::tie(dw, dtheta, db) =
        params_op.call(grad, input, weight, theta, stride, rounding, sigma, radius, bias_needed, theta_needed);
    if (ctx->needs_input_grad(1)) grad_weight = dw;
    if (theta_needed) grad_theta = dtheta;
    if (bias_needed) grad_bias = db;
  } else if (bias_needed) {
    grad_bias = bias_grad(grad);
  }
  // Parameters cast by the op under autocast (forward_autocast) get their gradients in their own dtype.
  const auto weight_dtype = static_cast<at::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
  const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
  if (grad_weight.defined() && grad_weight.scalar_type() != weight_dtype) grad_weight = grad_weight.to(weight_dtype);
  if (grad_bias.defined() && grad_bias.scalar_type() != bias_dtype) grad_bias = grad_bias.to(bias_dtype);
  return {grad_input, grad_weight, grad_theta, grad_bias};
}

variable_list conv_backward(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& input,
                            const at::Tensor& weight, const at::Tensor& theta) {
  return conv_params_grads(ctx, grad, input, weight, theta,
                           conv_input_grad(ctx, grad, input, weight, theta, ctx->needs_input_grad(0)));
}

// The weight and bias a call computes with. Under autocast (autocast_dtype given) the eligible ones
// (at::autocast::cached_cast's rule) are cast to its dtype here, below autograd, as cached_cast would
// cast them above it: the same values, but no cast nodes in the graph (two per call and two in its
// backward); conv_backward casts their gradients back. The dtypes they came in are saved in ctx.
struct CallParams {
  at::Tensor weight;
  c10::optional<at::Tensor> bias;
};

CallParams call_params(AutogradContext* ctx, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       c10::optional<at::ScalarType> autocast_dtype, c10::DeviceType device_type) {
  const bool has_bias = is_given(bias);
  ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
  ctx->saved_data["bias_dtype"] = static_cast<int64_t>(has_bias ? bias->scalar_type() : weight.scalar_type());
  if (!autocast_dtype.has_value()) return {weight, bias};
  auto cast = [&](const at::Tensor& t) {
    return at::autocast::is_eligible(t, device_type) ? t.to(*autocast_dtype) : t;
  };
  return {cast(weight), has_bias ? c10::optional<at::Tensor>(cast(*bias)) : bias};
}

void save_options(AutogradContext* ctx, const c10::optional<at::Tensor>& bias, int64_t stride,
                  c10::string_view rounding, double sigma, double radius, bool residual) {
  ctx->saved_data["stride"] = stride;
  ctx->saved_data["rounding"] = std::string(rounding);
  ctx->saved_data["sigma"] = sigma;
  ctx->saved_data["radius"] = radius;
  ctx->saved_data["residual"] = residual;
  ctx->saved_data["has_bias"] = is_given(bias);
}

// oriented_dwconv1d(gelu(pre + pre_bias), ...) without autograd (inference tensors, autocast's inner
// call, the autograd node's forward).
at::Tensor forward_gelu(const at::Tensor& pre, const at::Tensor& weight, const at::Tensor& theta,
                        const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                        double sigma, double radius, bool residual, const c10::optional<at::Tensor>& pre_bias) {
  static auto op = find_op<ForwardFn>("mmo1d::oriented_dwconv1d");
  static auto gelu_op = find_op<GeluAndGradFn>("mmo1d::gelu_and_grad");
  const at::Tensor h = is_given(pre_bias)
                           ? std::get<0>(gelu_op.call(pre, c10::nullopt, pre_bias))
                           : at::gelu(pre);
  return op.call(h, weight, theta, bias, stride, rounding, sigma, radius, residual);
}

// The op's autograd node, in C++ so that a call costs no more host time than an ATen convolution's.
// GELU: the op on h = gelu(pre + pre_bias) (exact GELU; pre_bias optional, per channel) that saves pre,
// not h; backward takes the op's input gradient dh (which reads only the shape, dtype and layout that h
// shares with pre), then in one pass over pre makes h again, GELU's gradient of dh and pre_bias's
// gradient (mmo1d::gelu_and_grad), then the weight, angle and bias gradients at h. Where pre is kept
// anyway (a GELU's backward keeps it), this saves one activation; one node of autograd instead of two,
// no Python in backward; pre_bias, the bias of the Linear that makes pre, gets its gradient without a
// pass of its own. Derived names the node (profiles show it).
template <typename Derived, bool GELU>
class ConvFunction : public torch::autograd::Function<Derived> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& theta, const c10::optional<at::Tensor>& bias, int64_t stride,
                            c10::string_view rounding, double sigma, double radius, bool residual,
                            const c10::optional<at::Tensor>& pre_bias = c10::nullopt,
                            c10::optional<at::ScalarType> autocast_dtype = c10::nullopt,
                            c10::DeviceType device_type = c10::DeviceType::CPU) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const CallParams p = call_params(ctx, weight, bias, autocast_dtype, device_type);
    ctx->save_for_backward({input, p.weight, theta, pre_bias.has_value() ? *pre_bias : at::Tensor()});
    save_options(ctx, bias, stride, rounding, sigma, radius, residual);
    if constexpr (GELU) {
      return forward_gelu(input, p.weight, theta, p.bias, stride, rounding, sigma, radius, residual, pre_bias);
    } else {
      static auto op = find_op<ForwardFn>("mmo1d::oriented_dwconv1d");
      return op.call(input, p.weight, theta, p.bias, stride, rounding, sigma, radius, residual);
    }
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    variable_list grads;
    if constexpr (GELU) {
      static auto gelu_and_grad = find_op<GeluAndGradFn>("mmo1d::gelu_and_grad");
      at::NoGradGuard no_grad;
      const at::Tensor& pre = saved[0];
      const c10::optional<at::Tensor> pre_bias =
          saved[3].defined() ? c10::optional<at::Tensor>(saved[3]) : c10::nullopt;
      const bool pre_bias_grad =
          pre_bias.has_value() && ctx->needs_input_grad(ctx->saved_data["has_bias"].toBool() ? 4 : 3);
      at::Tensor dh =
          conv_input_grad(ctx, grad_outputs[0], pre, saved[1], saved[2], ctx->needs_input_grad(0) || pre_bias_grad);
      at::Tensor h, dpre, dpre_bias;
      std::tie(h, dpre, dpre_bias) =
          gelu_and_grad.call(pre, dh.defined() ? c10::optional<at::Tensor>(dh) : c10::nullopt, pre_bias);
      dh.reset();  // freed before the weight gradient: no more 4C tensors alive than before
      if (!ctx->needs_input_grad(0)) dpre.reset();
      grads = conv_params_grads(ctx, grad_outputs[0], h, saved[1], saved[2], dpre);
      grads.resize(kForwardArgs);
      if (pre_bias_grad) grads[kPreBiasArg] = dpre_bias;
    } else {
      grads = conv_backward(ctx, grad_outputs[0], saved[0], saved[1], saved[2]);
      grads.resize(kForwardArgs);
    }
    return grads;
  }
};

class OrientedDWConv1dFunction : public ConvFunction<OrientedDWConv1dFunction, false> {};
class OrientedDWConv1dGeluFunction : public ConvFunction<OrientedDWConv1dGeluFunction, true> {};

// Whether Function::apply on these inputs records a backward (as it decides it): the forward then
// keeps the tables its backward reads again (kept_tables.h).
bool records_backward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                      const c10::optional<at::Tensor>& bias, const c10::optional<at::Tensor>& pre_bias) {
  auto wants_grad = [](const c10::optional<at::Tensor>& t) { return is_given(t) && t->requires_grad(); };
  return at::GradMode::is_enabled() && (input.requires_grad() || weight.requires_grad() || theta.requires_grad() ||
                                        wants_grad(bias) || wants_grad(pre_bias));
}

at::Tensor forward_autograd(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                            double sigma, double radius, bool residual) {
  const KeepTablesForBackward keep(records_backward(input, weight, theta, bias, c10::nullopt));
  return OrientedDWConv1dFunction::apply(input, weight, theta, bias, stride, rounding, sigma, radius, residual);
}

at::Tensor forward_gelu_autograd(const at::Tensor& pre, const at::Tensor& weight, const at::Tensor& theta,
                                 const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                                 double sigma, double radius, bool residual,
                                 const c10::optional<at::Tensor>& pre_bias) {
  const KeepTablesForBackward keep(records_backward(pre, weight, theta, bias, pre_bias));
  return OrientedDWConv1dGeluFunction::apply(pre, weight, theta, bias, stride, rounding, sigma, radius, residual,
                                             pre_bias);
}

// Under autocast the op runs in the autocast dtype, like conv2d; theta is never cast (offsets are
// always computed from float32 angles). The input is cast as cached_cast casts it; with a graph to
// record, the weight and bias are cast inside the autograd node (call_params), else here. GELU:
// oriented_dwconv1d_gelu, whose pre is cast as the op's input would be (GELU runs in its input's dtype);
// its pre_bias is never cast (added to pre in float32).
template <c10::DispatchKey autocast_key, c10::DeviceType device_type, bool GELU>
at::Tensor autocast_call(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                         const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                         double sigma, double radius, bool residual, const c10::optional<at::Tensor>& pre_bias) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  const auto dtype = at::autocast::get_autocast_dtype(device_type);
  const at::Tensor x = at::autocast::cached_cast(dtype, input, device_type);
  if (at::GradMode::is_enabled() && !c10::InferenceMode::is_enabled()) {
    using Function = std::conditional_t<GELU, OrientedDWConv1dGeluFunction, OrientedDWConv1dFunction>;
    const KeepTablesForBackward keep(records_backward(x, weight, theta, bias, pre_bias));
    return Function::apply(x, weight, theta, bias, stride, rounding, sigma, radius, residual, pre_bias,
                           c10::optional<at::ScalarType>(dtype), device_type);
  }
  c10::optional<at::Tensor> cast_bias;
  if (is_given(bias)) cast_bias = at::autocast::cached_cast(dtype, *bias, device_type);
  const at::Tensor cast_weight = at::autocast::cached_cast(dtype, weight, device_type);
  if constexpr (GELU) {
    static auto op = find_op<GeluForwardFn>("mmo1d::oriented_dwconv1d_gelu");
    return op.call(x, cast_weight, theta, cast_bias, stride, rounding, sigma, radius, residual, pre_bias);
  } else {
    static auto op = find_op<ForwardFn>("mmo1d::oriented_dwconv1d");
    return op.call(x, cast_weight, theta, cast_bias, stride, rounding, sigma, radius, residual);
  }
}

template <c10::DispatchKey autocast_key, c10::DeviceType device_type>
at::Tensor forward_autocast(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                            double sigma, double radius, bool residual) {
  return autocast_call<autocast_key, device_type, false>(input, weight, theta, bias, stride, rounding, sigma, radius,
                                                         residual, c10::nullopt);
}

template <c10::DispatchKey autocast_key, c10::DeviceType device_type>
at::Tensor forward_gelu_autocast(const at::Tensor& pre, const at::Tensor& weight, const at::Tensor& theta,
                                 const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding,
                                 double sigma, double radius, bool residual,
                                 const c10::optional<at::Tensor>& pre_bias) {
  return autocast_call<autocast_key, device_type, true>(pre, weight, theta, bias, stride, rounding, sigma, radius,
                                                        residual, pre_bias);
}

}  // namespace

TORCH_LIBRARY(mmo1d, m) {
  def_with_autograd(m,
                    "oriented_dwconv1d(Tensor input, Tensor weight, Tensor theta, Tensor? bias, int stride, "
                    "str rounding, float sigma, float radius, bool residual) -> Tensor",
                    forward_autograd);
  // oriented_dwconv1d(gelu(pre + pre_bias), ...) with the exact GELU (pre_bias per channel, optional),
  // keeping pre instead of the GELU output for backward (OrientedDWConv1dGeluFunction).
  def_with_autograd(m,
                    "oriented_dwconv1d_gelu(Tensor pre, Tensor weight, Tensor theta, Tensor? bias, int stride, "
                    "str rounding, float sigma, float radius, bool residual, Tensor? pre_bias=None) -> Tensor",
                    forward_gelu_autograd);
  m.impl("oriented_dwconv1d_gelu", torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd, &forward_gelu));
  m.def(
      "oriented_dwconv1d_backward_input(Tensor grad_output, Tensor input, Tensor weight, Tensor theta, int stride, "
      "str rounding, float sigma, float radius, bool residual) -> Tensor");
  // The weight, angle and bias gradients in one call: (grad_weight, grad_theta, grad_bias). The
  // angles' has C values only with need_theta (an interpolated rule), the bias' only with need_bias,
  // else none. On CUDA's channels_last paths the weight-gradient kernels, which read grad_output
  // anyway, also sum the bias gradient; with interpolated taps the weight and angle gradients come
  // from the same sums of grad_output * x at every sampled offset.
  m.def(
      "oriented_dwconv1d_backward_params(Tensor grad_output, Tensor input, Tensor weight, Tensor theta, int stride, "
      "str rounding, float sigma, float radius, bool need_bias, bool need_theta) -> (Tensor, Tensor, Tensor)");
  // The kernel path a call takes on input's device ("forward", "backward_input" or
  // "backward_weight") with this tap rule: a debugging and testing aid, see
  // mmo1d.ops.oriented_dwconv1d_path.
  m.def(
      "oriented_dwconv1d_path(Tensor input, Tensor weight, Tensor theta, int stride, str rounding, float sigma, "
      "float radius, str direction) -> str");
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCPU, m) {
  m.impl("oriented_dwconv1d", forward_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
  m.impl("oriented_dwconv1d_gelu", forward_gelu_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCUDA, m) {
  m.impl("oriented_dwconv1d", forward_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
  m.impl("oriented_dwconv1d_gelu", forward_gelu_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

}  // namespace mmo1d
