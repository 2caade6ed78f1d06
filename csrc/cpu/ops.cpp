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
#include "kernels.h"
#include "plan.h"

namespace mmo1d {
namespace cpu {
namespace {

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "oriented_dwconv1d (CPU kernel): ", name, " is on ", t.device());
}

at::MemoryFormat kernel_format(bool channels_last) {
  return channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

at::Tensor forward_cpu(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                       const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  check_forward_args(input, weight, theta, bias, stride);
  check_cpu(input, "input");
  const Geometry g = make_geometry(input, weight.size(1), stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor x = input.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor w = weight.to(op_t).contiguous();
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor b = has_bias ? bias->to(op_t).contiguous() : at::Tensor();
  at::Tensor y = at::empty({g.N, g.C, g.Ho, g.Wo}, x.options().memory_format(kernel_format(nhwc)));
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_cpu", [&] {
    const MergedWeights<scalar_t> merged = merge_weights(plan, w.data_ptr<scalar_t>());
    const scalar_t* b_ptr = has_bias ? b.data_ptr<scalar_t>() : nullptr;
    if (nhwc) {
      nhwc_forward(x.data_ptr<scalar_t>(), plan, merged.data(), b_ptr, y.data_ptr<scalar_t>(), g, residual);
    } else {
      nchw_forward(x.data_ptr<scalar_t>(), plan, merged.data(), b_ptr, y.data_ptr<scalar_t>(), g, residual);
    }
  });
  return y.to(input.scalar_type()).contiguous(output_memory_format(input));
}

// Checks the arguments of a backward op and returns the forward geometry.
Geometry backward_geometry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& theta, int64_t stride) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cpu(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  return make_geometry(input, weight.size(1), stride);
}

at::Tensor backward_input_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& theta, int64_t stride, bool floor_rounding, bool residual) {
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor w = weight.to(op_t).contiguous();
  at::Tensor dx = at::empty({g.N, g.C, g.H, g.W}, dy.options().memory_format(kernel_format(nhwc)));
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_backward_input_cpu", [&] {
    const MergedWeights<scalar_t> merged = merge_weights(plan, w.data_ptr<scalar_t>());
    if (nhwc) {
      nhwc_backward_input(dy.data_ptr<scalar_t>(), plan, merged.data(), dx.data_ptr<scalar_t>(), g, residual);
    } else {
      nchw_backward_input(dy.data_ptr<scalar_t>(), plan, merged.data(), dx.data_ptr<scalar_t>(), g, residual);
    }
  });
  return dx.to(input.scalar_type()).contiguous(output_memory_format(input));
}

at::Tensor backward_weight_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                               const at::Tensor& theta, int64_t stride, bool floor_rounding) {
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const Plan plan = make_plan(theta, g.K, floor_rounding);
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor x = input.to(op_t).contiguous(kernel_format(nhwc));
  std::vector<double> grad_merged(plan.merged_size);
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_backward_weight_cpu", [&] {
    if (nhwc) {
      nhwc_backward_weight(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), plan, grad_merged.data(), g);
    } else {
      nchw_backward_weight(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), plan, grad_merged.data(), g);
    }
  });
  // Every tap's gradient is its entry's.
  at::Tensor dw = at::empty({g.C, g.K}, at::TensorOptions().dtype(at::kDouble));
  double* out = dw.data_ptr<double>();
  for (int64_t c = 0; c < g.C; ++c) {
    const Run& run = plan.runs[plan.run_of[c]];
    for (int64_t t = 0; t < g.K; ++t) {
      out[c * g.K + t] = grad_merged[run.w0 + plan.tap_entry[c * g.K + t] * run.len() + (c - run.c0)];
    }
  }
  return dw.to(weight.scalar_type());
}

std::string path_cpu(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta, int64_t stride,
                     c10::string_view rounding, double radius, c10::string_view pass) {
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
