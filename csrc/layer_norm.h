// Layer normalisation over the last dimension (channels-last rows), optionally followed by GELU:
// shared definitions.
//
//   y = act((x - mean) * rstd * w + b),  mean and rstd over the last dimension of x,
//   rstd = 1 / sqrt(var + eps) with the biased variance, act = identity or exact (erf) GELU.
//
// The output dtype is chosen by the caller (the input dtype, or under autocast float32, or the
// autocast dtype when the consumer would cast to it anyway); statistics and arithmetic are in
// float32 (float64 for float64 input).
//
// Everything here is inline: the CUDA sources, also compiled on their own into a just-in-time
// library (mmo1d/ops/_ext.py), need no symbol of mmo1d._C.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>

#include "common.h"

namespace mmo1d {

// The widest rows the CUDA backward kernel keeps in registers; wider rows take the composite.
constexpr int64_t kLayerNormMaxFusedChannels = 1024;

// Accumulation dtype of the layer norm: float64 for float64 input, float32 otherwise.
inline at::ScalarType layer_norm_acc_type(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

// Whether the op supports input dtype `in` with output dtype `out`: the same floating dtype,
// float16/bfloat16 -> float32 (autocast's rule for layer norm), float32 -> float16/bfloat16.
inline bool layer_norm_dtypes_supported(at::ScalarType in, at::ScalarType out) {
  const auto is_reduced = [](at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; };
  if (in == out) {
    return in == at::kFloat || in == at::kDouble || is_reduced(in);
  }
  return (is_reduced(in) && out == at::kFloat) || (in == at::kFloat && is_reduced(out));
}

// Checks shared by every device: dtypes, shapes, finite eps. Returns the number of channels C.
inline int64_t check_layer_norm_args(const char* name, const at::Tensor& input, const at::Tensor& weight,
                                     const at::Tensor& bias, double eps, at::ScalarType out_dtype) {
  TORCH_CHECK(input.dim() >= 1, name, ": input must have at least one dimension (..., C)");
  TORCH_CHECK(layer_norm_dtypes_supported(input.scalar_type(), out_dtype), name, ": unsupported dtypes, input ",
              input.scalar_type(), " and output ", out_dtype,
              " (supported: the same floating dtype, float16/bfloat16 -> float32, "
              "float32 -> float16/bfloat16)");
  const int64_t C = input.size(-1);
  TORCH_CHECK(C > 0, name, ": the normalised (last) dimension is empty");
  TORCH_CHECK(weight.dim() == 1 && weight.numel() == C && bias.dim() == 1 && bias.numel() == C, name,
              ": weight and bias must have shape (C,) = (" + std::to_string(C) + ",), got " +
                  shape_str(weight.sizes()) + " and " + shape_str(bias.sizes()));
  TORCH_CHECK(weight.is_floating_point() && bias.is_floating_point(), name, ": weight and bias must be floating point");
  TORCH_CHECK(weight.device() == input.device() && bias.device() == input.device(), name,
              ": input, weight and bias must be on one device");
  TORCH_CHECK(std::isfinite(eps) && eps >= 0.0, name, ": eps must be finite and non-negative");
  return C;
}

// Composite of ATen ops (any device): (y, mean, rstd), mean and rstd of shape (rows,).
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_last_composite(const at::Tensor& input,
                                                                                const at::Tensor& weight,
                                                                                const at::Tensor& bias, double eps,
                                                                                bool gelu, at::ScalarType out_dtype) {
  const int64_t C = input.size(-1);
  const auto acc = layer_norm_acc_type(input.scalar_type());
  const auto x = input.to(acc).reshape({-1, C});
  const auto mean = x.mean(1);
  const auto xc = x - mean.unsqueeze(1);
  const auto rstd = ((xc * xc).mean(1) + eps).rsqrt();
  auto y = at::addcmul(bias.to(acc), xc * rstd.unsqueeze(1), weight.to(acc));
  if (gelu) {
    y = at::gelu(y);
  }
  return {y.to(out_dtype).reshape(input.sizes()), mean, rstd};
}

// Composite backward: (grad_input, grad_weight, grad_bias); undefined where output_mask is false.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_last_backward_composite(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& weight, const at::Tensor& bias, bool gelu, std::array<bool, 3> output_mask) {
  const int64_t C = input.size(-1);
  const auto acc = layer_norm_acc_type(input.scalar_type());
  const auto w = weight.to(acc);
  const auto r = rstd.unsqueeze(1);
  const auto xhat = (input.to(acc).reshape({-1, C}) - mean.unsqueeze(1)) * r;
  auto d = grad_output.to(acc).reshape({-1, C});
  if (gelu) {
    d = at::gelu_backward(d, at::addcmul(bias.to(acc), xhat, w));
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const auto g = d * w;
    grad_input =
        (r * (g - g.mean(1, true) - xhat * (g * xhat).mean(1, true))).to(input.scalar_type()).reshape(input.sizes());
  }
  if (output_mask[1]) {
    grad_weight = (d * xhat).sum(0).to(weight.scalar_type());
  }
  if (output_mask[2]) {
    grad_bias = d.sum(0).to(bias.scalar_type());
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace mmo1d
