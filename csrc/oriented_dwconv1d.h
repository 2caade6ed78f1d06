// Oriented depthwise 1D convolution: shared declarations.
//
//   y[n, c, p, q] = b[c] + sum_t w[c, t] * x[n, c, p*s + dh(c, t), q*s + dw(c, t)]
//   d = t - K/2,  dh = R(-d * sin(theta_c)),  dw = R(d * cos(theta_c))
//
// R truncates toward zero (rule 'trunc', the behaviour the released weights were trained with) or
// floors (rule 'floor', the formula printed in the paper); the interpolated rules are in interp.h. sin and cos are the float32 values of the float32
// angle, rounded to nearest from a double evaluation, so every device computes identical offsets.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/promote_types.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "common.h"
#include "tap_rule.h"

namespace mmo1d {

// A NaN or infinite angle has no direction: its sine and cosine are taken as 0, so every tap of the
// channel sits at the centre (offset 0) and the channel computes b + x * sum(w) -- defined
// behaviour on every device, with no float-to-int conversion of a non-finite value. Finite angles
// of any magnitude (1e30 included) keep their double-precision sine and cosine.
MMO1D_HOST_DEVICE void angle_sincos(float theta, float* s, float* c) {
  if (!(fabsf(theta) <= FLT_MAX)) {  // NaN compares false
    *s = 0.0f;
    *c = 0.0f;
    return;
  }
  *s = static_cast<float>(sin(static_cast<double>(theta)));
  *c = static_cast<float>(cos(static_cast<double>(theta)));
}

// v rounded to a pixel by a rounding rule: down for 'floor', toward zero for 'trunc'.
MMO1D_HOST_DEVICE int round_offset(float v, TapMode mode) {
  return mode == TapMode::kFloor ? static_cast<int>(floorf(v)) : static_cast<int>(v);
}

// Offsets (dh, dw) of tap t of a kernel of size K at the angle whose sine and cosine are given.
MMO1D_HOST_DEVICE void tap_offset(int t, int K, float s, float c, TapMode mode, int* dh, int* dw) {
  const float d = static_cast<float>(t - K / 2);
  *dh = round_offset(-d * s, mode);
  *dw = round_offset(d * c, mode);
}

// Number of outputs along one axis: ceil(size / stride).
inline int64_t out_size(int64_t size, int64_t stride) {
  return (size + stride - 1) / stride;
}

// The output follows the input's layout: channels_last when the input is laid out that way.
inline at::MemoryFormat output_memory_format(const at::Tensor& input) {
  return (input.is_contiguous(at::MemoryFormat::ChannelsLast) && !input.is_contiguous())
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// The weight as the kernels take it, (C, K): a (C, K) tensor as it is, the modules' (C, 1, 1, K)
// parameter as a (C, K) view, so that no caller has to reshape it (in Python a reshape costs
// microseconds per call, and in training a node of the backward graph). Every device entry takes
// its weight through this first and returns the weight gradient in the weight's own shape.
inline at::Tensor taps_view(const at::Tensor& weight) {
  if (weight.dim() == 2) return weight;
  TORCH_CHECK(weight.dim() == 4 && weight.size(1) == 1 && weight.size(2) == 1,
              "oriented_dwconv1d: weight must be (C, K) or (C, 1, 1, K), got shape ", shape_str(weight));
  return weight.reshape({weight.size(0), weight.size(3)});
}

// Argument checks shared by every device; errors name the offending argument. They raise
// RuntimeError (TORCH_CHECK).
static inline void check_forward_args(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                                      const c10::optional<at::Tensor>& bias, int64_t stride) {
  TORCH_CHECK(input.dim() == 4, "oriented_dwconv1d: input must be 4-D (N, C, H, W), got ", std::to_string(input.dim()),
              "-D of shape ", shape_str(input));
  TORCH_CHECK(weight.dim() == 2, "oriented_dwconv1d: weight must be 2-D (C, K), got shape ", shape_str(weight));
  TORCH_CHECK(theta.dim() == 1, "oriented_dwconv1d: theta must be 1-D (C,), got shape ", shape_str(theta));
  TORCH_CHECK(stride >= 1, "oriented_dwconv1d: stride must be >= 1, got ", std::to_string(stride));
  const int64_t C = input.size(1);
  const int64_t K = weight.size(1);
  TORCH_CHECK(K >= 1 && K % 2 == 1,
              "oriented_dwconv1d: kernel size must be odd and positive, got K=", std::to_string(K));
  TORCH_CHECK(input.size(2) >= 1 && input.size(3) >= 1, "oriented_dwconv1d: input height and width must be >= 1, got ",
              shape_str(input));
  TORCH_CHECK(weight.size(0) == C, "oriented_dwconv1d: weight has ", std::to_string(weight.size(0)),
              " channels but input has ", std::to_string(C));
  TORCH_CHECK(theta.size(0) == C, "oriented_dwconv1d: theta has ", std::to_string(theta.size(0)),
              " angles but input has ", std::to_string(C), " channels");
  TORCH_CHECK(input.is_floating_point(), "oriented_dwconv1d: input must be a floating-point tensor, got ",
              input.scalar_type());
  TORCH_CHECK(theta.is_floating_point(), "oriented_dwconv1d: theta must be a floating-point tensor, got ",
              theta.scalar_type());
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "oriented_dwconv1d: weight dtype ", weight.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(weight.device() == input.device() && theta.device() == input.device(), "oriented_dwconv1d: input (",
              input.device(), "), weight (", weight.device(), ") and theta (", theta.device(),
              ") must be on the same device");
  if (is_given(bias)) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == C, "oriented_dwconv1d: bias must have shape (", std::to_string(C),
                ",), got ", shape_str(*bias));
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), "oriented_dwconv1d: bias dtype ", bias->scalar_type(),
                " differs from input dtype ", input.scalar_type());
    TORCH_CHECK(bias->device() == input.device(), "oriented_dwconv1d: bias (", bias->device(), ") and input (",
                input.device(), ") must be on the same device");
  }
}

// grad_output of the op for this input and stride: (N, C, ceil(H / stride), ceil(W / stride)) in
// input's dtype.
inline void check_grad_output(const at::Tensor& grad_output, const at::Tensor& input, int64_t stride) {
  check_grad_shape("oriented_dwconv1d", grad_output,
                   {input.size(0), input.size(1), out_size(input.size(2), stride), out_size(input.size(3), stride)},
                   input.scalar_type());
}

// The bias gradient: grad_output summed over N, H and W, accumulated in float32 (float64 for
// float64), in grad_output's dtype.
inline at::Tensor bias_grad(const at::Tensor& grad_output) {
  return grad_output.sum({0, 2, 3}, false, at::promote_types(grad_output.scalar_type(), at::kFloat))
      .to(grad_output.scalar_type());
}

// bias_grad over slices of at most 8 MiB of grad_output, added in order: ATen's reduction over
// (N, H, W) takes a temporary buffer nearly as large as its input (132 MiB for a 147 MiB bfloat16
// channels_last tensor on an H100), which this bounds.
inline at::Tensor bias_grad_in_slices(const at::Tensor& grad_output) {
  const int64_t n = grad_output.size(0);
  const int64_t image_bytes = n > 0 ? grad_output.nbytes() / n : 0;
  const int64_t images = std::max<int64_t>(1, (int64_t{8} << 20) / std::max<int64_t>(image_bytes, 1));
  if (images >= n) return bias_grad(grad_output);
  const auto acc_type = at::promote_types(grad_output.scalar_type(), at::kFloat);
  at::Tensor acc = grad_output.narrow(0, 0, images).sum({0, 2, 3}, false, acc_type);
  for (int64_t i = images; i < n; i += images) {
    acc.add_(grad_output.narrow(0, i, std::min(images, n - i)).sum({0, 2, 3}, false, acc_type));
  }
  return acc.to(grad_output.scalar_type());
}

// The tap rule of a call of the weight, angle and bias gradients: as parse_tap_rule, with an error
// when the angles' gradient is asked of a rounded rule (its output is piecewise constant in them).
inline TapRule params_tap_rule(c10::string_view rounding, double sigma, double radius, bool need_theta) {
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  TORCH_CHECK(!need_theta || rule.interpolated(), "oriented_dwconv1d: the angles have no gradient with rounding '",
              std::string(rounding), "' (only 'bilinear' and 'gaussian' give one)");
  return rule;
}

// The pass a path query names: 0 "forward", 1 "backward_input", 2 "backward_weight".
inline int pass_index(c10::string_view pass) {
  if (pass == "forward") return 0;
  if (pass == "backward_input") return 1;
  TORCH_CHECK(pass == "backward_weight",
              "oriented_dwconv1d_path: pass must be 'forward', 'backward_input' or 'backward_weight', got '",
              std::string(pass), "'");
  return 2;
}

// The arguments of the path query (oriented_dwconv1d_path): input and weight as for the op.
inline void check_path_args(const at::Tensor& input, const at::Tensor& weight, int64_t stride) {
  TORCH_CHECK(input.dim() == 4 && weight.dim() == 2 && weight.size(0) == input.size(1),
              "oriented_dwconv1d_path: input must be (N, C, H, W) and weight (C, K), got ", shape_str(input), " and ",
              shape_str(weight));
  TORCH_CHECK(stride >= 1 && weight.size(1) % 2 == 1, "oriented_dwconv1d_path: stride must be >= 1 and K odd, got ",
              "stride ", std::to_string(stride), " and K=", std::to_string(weight.size(1)));
}

}  // namespace mmo1d
