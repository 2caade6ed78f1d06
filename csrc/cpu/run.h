// What the CPU entry points (ops.cpp, for every tap rule) share once they have a plan: the tensors
// in the kernels' precision and layout, the drivers of kernels.h, and the result back in the input's
// dtype and layout. `merge(const T* w)` gives the plan's merged weights (plan.h) of the (C, K)
// weights w.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <vector>

#include "../oriented_dwconv1d.h"
#include "kernels.h"
#include "plan.h"

namespace mmo1d {
namespace cpu {

inline at::MemoryFormat kernel_format(bool channels_last) {
  return channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

template <typename Merge>
at::Tensor run_forward(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       const Plan& plan, const Geometry& g, bool residual, Merge merge) {
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor x = input.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor w = weight.to(op_t).contiguous();
  const bool has_bias = is_given(bias);
  const at::Tensor b = has_bias ? bias->to(op_t).contiguous() : at::Tensor();
  at::Tensor y = at::empty({g.N, g.C, g.Ho, g.Wo}, x.options().memory_format(kernel_format(nhwc)));
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_cpu", [&] {
    const MergedWeights<scalar_t> merged = merge(w.data_ptr<scalar_t>());
    const scalar_t* b_ptr = has_bias ? b.data_ptr<scalar_t>() : nullptr;
    if (nhwc) {
      nhwc_forward(x.data_ptr<scalar_t>(), plan, merged.data(), b_ptr, y.data_ptr<scalar_t>(), g, residual);
    } else {
      nchw_forward(x.data_ptr<scalar_t>(), plan, merged.data(), b_ptr, y.data_ptr<scalar_t>(), g, residual);
    }
  });
  return y.to(input.scalar_type()).contiguous(output_memory_format(input));
}

template <typename Merge>
at::Tensor run_backward_input(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                              const Plan& plan, const Geometry& g, bool residual, Merge merge) {
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor w = weight.to(op_t).contiguous();
  at::Tensor dx = at::empty({g.N, g.C, g.H, g.W}, dy.options().memory_format(kernel_format(nhwc)));
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_cpu", [&] {
    const MergedWeights<scalar_t> merged = merge(w.data_ptr<scalar_t>());
    if (nhwc) {
      nhwc_backward_input(dy.data_ptr<scalar_t>(), plan, merged.data(), dx.data_ptr<scalar_t>(), g, residual);
    } else {
      nchw_backward_input(dy.data_ptr<scalar_t>(), plan, merged.data(), dx.data_ptr<scalar_t>(), g, residual);
    }
  });
  return dx.to(input.scalar_type()).contiguous(output_memory_format(input));
}

// The gradient of every merged weight of the plan (plan.merged_size values, double).
inline std::vector<double> run_backward_weight(const at::Tensor& grad_output, const at::Tensor& input, const Plan& plan,
                                               const Geometry& g) {
  const bool nhwc = use_channels_last_kernels(input, plan);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous(kernel_format(nhwc));
  const at::Tensor x = input.to(op_t).contiguous(kernel_format(nhwc));
  std::vector<double> grad_merged(plan.merged_size);
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_cpu", [&] {
    if (nhwc) {
      nhwc_backward_weight(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), plan, grad_merged.data(), g);
    } else {
      nchw_backward_weight(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), plan, grad_merged.data(), g);
    }
  });
  return grad_merged;
}

}  // namespace cpu
}  // namespace mmo1d
