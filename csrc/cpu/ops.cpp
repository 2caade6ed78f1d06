// CPU entry points of the oriented depthwise 1D convolution and their registration.
//
// Half and bfloat16 are computed in float32 (copies), float64 in float64. A channels_last input is
// computed on its NHWC memory when its channels form runs long enough to fill vectors (plan.h),
// otherwise on an NCHW copy; the result takes the input's layout either way. The weight gradient is
// reduced in a fixed order (deterministic) and accumulated in double.
//
// Rounded taps ('trunc', 'floor') are the entries of a Plan (plan.h). Interpolated taps
// ('bilinear', 'gaussian') become the entries of an InterpPlan (interp_plan.h) that the same
// kernels run as they are; the weight and angle gradients are contracted from the entries'
// gradients (with the angles in float64 for float64 calls).
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

#include "../op_registration.h"
#include "../oriented_dwconv1d.h"
#include "interp_plan.h"
#include "plan.h"
#include "run.h"

namespace mmo1d {
namespace cpu {
namespace {

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "oriented_dwconv1d (CPU kernel): ", name, " is on ", t.device());
}

// The plan of interpolated taps, in double for float64 calls.
InterpPlan interp_plan_of(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                          const TapRule& rule) {
  return make_interp_plan(theta, weight.size(1), rule, input.scalar_type() == at::kDouble);
}

at::Tensor forward_cpu(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta,
                       const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding, double sigma,
                       double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  check_forward_args(input, weight, theta, bias, stride);
  check_cpu(input, "input");
  const Geometry g = make_geometry(input, weight.size(1), stride);
  if (rule.interpolated()) {
    const InterpPlan ip = interp_plan_of(input, weight, theta, rule);
    return run_forward(input, weight, bias, ip.gather, g, residual,
                       [&](const auto* w) { return merge_interp_weights(ip, w); });
  }
  const Plan plan = make_plan(theta, g.K, rule.mode);
  return run_forward(input, weight, bias, plan, g, residual, [&](const auto* w) { return merge_weights(plan, w); });
}

// Checks the arguments of a backward op and returns the forward geometry.
Geometry backward_geometry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& theta, int64_t stride) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cpu(input, "input");
  check_cpu(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  return make_geometry(input, weight.size(1), stride);
}

at::Tensor backward_input_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                              const at::Tensor& theta, int64_t stride, c10::string_view rounding, double sigma,
                              double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  if (rule.interpolated()) {
    const InterpPlan ip = interp_plan_of(input, weight, theta, rule);
    return run_backward_input(grad_output, input, weight, ip.gather, g, residual,
                              [&](const auto* w) { return merge_interp_weights(ip, w); });
  }
  const Plan plan = make_plan(theta, g.K, rule.mode);
  return run_backward_input(grad_output, input, weight, plan, g, residual,
                            [&](const auto* w) { return merge_weights(plan, w); });
}

// The weight gradient of rounded taps, (C, K) in double: every tap's gradient is its entry's.
at::Tensor rounded_weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& theta,
                               const Geometry& g, TapMode mode) {
  const Plan plan = make_plan(theta, g.K, mode);
  const std::vector<double> grad_merged = run_backward_weight(grad_output, input, plan, g);
  at::Tensor dw = at::empty({g.C, g.K}, at::TensorOptions().dtype(at::kDouble));
  double* out = dw.data_ptr<double>();
  for (int64_t c = 0; c < g.C; ++c) {
    const Run& run = plan.runs[plan.run_of[c]];
    for (int64_t t = 0; t < g.K; ++t) {
      out[c * g.K + t] = grad_merged[run.w0 + plan.tap_entry[c * g.K + t] * run.len() + (c - run.c0)];
    }
  }
  return dw;
}

// (grad_weight, grad_theta, grad_bias); grad_theta has C values only with need_theta, grad_bias only
// with need_bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_params_cpu(const at::Tensor& grad_output,
                                                                   const at::Tensor& input, const at::Tensor& weight_arg,
                                                                   const at::Tensor& theta, int64_t stride,
                                                                   c10::string_view rounding, double sigma,
                                                                   double radius, bool need_bias, bool need_theta) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = params_tap_rule(rounding, sigma, radius, need_theta);
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  at::Tensor db = need_bias ? bias_grad(grad_output) : at::empty({0}, input.options());
  if (!rule.interpolated()) {
    const at::Tensor dw = rounded_weight_grad(grad_output, input, theta, g, rule.mode);
    return {dw.to(weight.scalar_type()).view(weight_arg.sizes()), at::empty({0}, theta.options()), db};
  }
  const InterpPlan ip = interp_plan_of(input, weight, theta, rule);
  const Plan& used = need_theta ? ip.all : ip.gather;
  const std::vector<double> grad_merged = run_backward_weight(grad_output, input, used, g);
  const at::Tensor w = weight.to(at::kDouble).contiguous();
  at::Tensor dw = at::empty({g.C, g.K}, w.options());
  at::Tensor dtheta = at::empty({need_theta ? g.C : 0}, w.options());
  contract_interp_grads(ip, used, grad_merged.data(), w.data_ptr<double>(), dw.data_ptr<double>(),
                        need_theta ? dtheta.data_ptr<double>() : nullptr);
  return {dw.to(weight.scalar_type()).view(weight_arg.sizes()), dtheta.to(theta.scalar_type()), db};
}

std::string path_cpu(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta, int64_t stride,
                     c10::string_view rounding, double sigma, double radius, c10::string_view pass) {
  const at::Tensor weight = taps_view(weight_arg);
  check_path_args(input, weight, stride);
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  parse_tap_rule(rounding, sigma, radius);
  pass_index(pass);
  return "cpu";  // one kernel family per pass on the CPU
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) { MMO1D_IMPL_ORIENTED_DWCONV1D(m, cpu); }

}  // namespace mmo1d
