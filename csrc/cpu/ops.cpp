// CPU entry points of the oriented depthwise 1D convolution and their registration.
//
// Half and bfloat16 are computed in float32 (copies), float64 in float64. A channels_last input is
// computed on its NHWC memory when its channels form runs long enough to fill vectors (plan.h),
// otherwise on an NCHW copy; the result takes the input's layout either way. The weight gradient is
// reduced in a fixed order (deterministic) and accumulated in double.
#include <torch/library.h>

#include <vector>

#include "../interp.h"
#include "../oriented_dwconv1d.h"
#include "plan.h"
#include "run.h"

namespace mmo1d {
namespace cpu {
namespace {

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "oriented_dwconv1d (CPU kernel): ", name, " is on ", t.device());
}

at::Tensor forward_cpu(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta,
                       const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  check_forward_args(input, weight, theta, bias, stride);
  check_cpu(input, "input");
  const Geometry g = make_geometry(input, weight.size(1), stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  return run_forward(input, weight, bias, plan, g, residual, [&](const auto* w) { return merge_weights(plan, w); });
}

// Checks the arguments of a backward op and returns the forward geometry.
Geometry backward_geometry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& theta, int64_t stride) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cpu(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  return make_geometry(input, weight.size(1), stride);
}

at::Tensor backward_input_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                              const at::Tensor& theta, int64_t stride, bool floor_rounding, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  return run_backward_input(grad_output, input, weight, plan, g, residual,
                            [&](const auto* w) { return merge_weights(plan, w); });
}

at::Tensor backward_weight_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                               const at::Tensor& theta, int64_t stride, bool floor_rounding) {
  const at::Tensor weight = taps_view(weight_arg);
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  const std::vector<double> grad_merged = run_backward_weight(grad_output, input, plan, g);
  // Every tap's gradient is its entry's.
  at::Tensor dw = at::empty({g.C, g.K}, at::TensorOptions().dtype(at::kDouble));
  double* out = dw.data_ptr<double>();
  for (int64_t c = 0; c < g.C; ++c) {
    const Run& run = plan.runs[plan.run_of[c]];
    for (int64_t t = 0; t < g.K; ++t) {
      out[c * g.K + t] = grad_merged[run.w0 + plan.tap_entry[c * g.K + t] * run.len() + (c - run.c0)];
    }
  }
  return dw.to(weight.scalar_type()).view(weight_arg.sizes());
}

std::string path_cpu(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta, int64_t stride,
                     c10::string_view rounding, double radius, c10::string_view pass) {
  const at::Tensor weight = taps_view(weight_arg);
  check_path_args(input, weight, stride);
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  if (rounding != "trunc" && rounding != "floor") make_interp_spec(rounding, 1.0, radius);  // checks them
  TORCH_CHECK(pass == "forward" || pass == "backward_input" || pass == "backward_weight",
              "oriented_dwconv1d_path: pass must be 'forward', 'backward_input' or 'backward_weight', got '",
              std::string(pass), "'");
  return "cpu";  // one kernel family per pass on the CPU
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("oriented_dwconv1d", &cpu::forward_cpu);
  m.impl("oriented_dwconv1d_backward_input", &cpu::backward_input_cpu);
  m.impl("oriented_dwconv1d_backward_weight", &cpu::backward_weight_cpu);
  m.impl("oriented_dwconv1d_path", &cpu::path_cpu);
}

}  // namespace mmo1d
