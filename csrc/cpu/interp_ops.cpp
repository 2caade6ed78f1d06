// CPU entry points of the interpolated oriented convolution ('bilinear', 'gaussian'): the samples
// of every tap become the entries of a plan (interp_plan.h) that the rounded op's CPU kernels run
// as they are; the weight and angle gradients are contracted from the entries' gradients.
//
// As for the rounded op: half and bfloat16 are computed in float32, float64 in float64 (with the
// angles in float64); the gradients are reduced in a fixed order.
#include <torch/library.h>

#include <vector>

#include "../oriented_dwconv1d.h"
#include "interp_plan.h"
#include "run.h"

namespace mmo1d {
namespace cpu {
namespace {

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "oriented_dwconv1d_interp (CPU kernel): ", name, " is on ", t.device());
}

// Checks a call's arguments and builds its plan.
InterpPlan plan_call(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                     const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding, double sigma,
                     double radius) {
  check_forward_args(input, weight, theta, bias, stride);
  check_cpu(input, "input");
  const InterpSpec spec = make_interp_spec(rounding, sigma, radius);
  return make_interp_plan(theta, weight.size(1), spec, input.scalar_type() == at::kDouble);
}

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta,
                   const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding, double sigma,
                   double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const InterpPlan ip = plan_call(input, weight, theta, bias, stride, rounding, sigma, radius);
  return run_forward(input, weight, bias, ip.gather, make_geometry(input, weight.size(1), stride), residual,
                     [&](const auto* w) { return merge_interp_weights(ip, w); });
}

void check_backward(const at::Tensor& grad_output, const at::Tensor& input, int64_t stride) {
  check_cpu(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
}

at::Tensor backward_input(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                          const at::Tensor& theta, int64_t stride, c10::string_view rounding, double sigma,
                          double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const InterpPlan ip = plan_call(input, weight, theta, c10::nullopt, stride, rounding, sigma, radius);
  check_backward(grad_output, input, stride);
  return run_backward_input(grad_output, input, weight, ip.gather, make_geometry(input, weight.size(1), stride),
                            residual, [&](const auto* w) { return merge_interp_weights(ip, w); });
}

// (grad_weight, grad_theta, grad_bias); grad_theta is empty (0 values) unless need_theta.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_params(const at::Tensor& grad_output, const at::Tensor& input,
                                                               const at::Tensor& weight_arg, const at::Tensor& theta,
                                                               int64_t stride, c10::string_view rounding, double sigma,
                                                               double radius, bool need_theta) {
  const at::Tensor weight = taps_view(weight_arg);
  const InterpPlan ip = plan_call(input, weight, theta, c10::nullopt, stride, rounding, sigma, radius);
  check_backward(grad_output, input, stride);
  const Geometry g = make_geometry(input, weight.size(1), stride);
  const Plan& used = need_theta ? ip.all : ip.gather;
  const std::vector<double> grad_merged = run_backward_weight(grad_output, input, used, g);
  const at::Tensor w = weight.to(at::kDouble).contiguous();
  at::Tensor dw = at::empty({g.C, g.K}, w.options());
  at::Tensor dtheta = at::empty({need_theta ? g.C : 0}, w.options());
  contract_interp_grads(ip, used, grad_merged.data(), w.data_ptr<double>(), dw.data_ptr<double>(),
                        need_theta ? dtheta.data_ptr<double>() : nullptr);
  return {dw.to(weight.scalar_type()).view(weight_arg.sizes()), dtheta.to(theta.scalar_type()), bias_grad(grad_output)};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("oriented_dwconv1d_interp", &cpu::forward);
  m.impl("oriented_dwconv1d_interp_backward_input", &cpu::backward_input);
  m.impl("oriented_dwconv1d_interp_backward_params", &cpu::backward_params);
}

}  // namespace mmo1d
