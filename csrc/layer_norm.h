// Layer normalisation over the last dimension (channels-last rows), optionally followed by GELU:
// shared declarations.
//
//   y = act((x - mean) * rstd * w + b),  mean and rstd over the last dimension of x,
//   rstd = 1 / sqrt(var + eps) with the biased variance, act = identity or exact (erf) GELU.
//
// The output dtype is chosen by the caller (the input dtype, or under autocast float32, or the
// autocast dtype when the consumer would cast to it anyway); statistics and arithmetic are in
// float32 (float64 for float64 input).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <tuple>

namespace mmo1d {

// The widest rows the CUDA backward kernel keeps in registers; wider rows take the composite.
constexpr int64_t kLayerNormMaxFusedChannels = 1024;

// Accumulation dtype of the layer norm: float64 for float64 input, float32 otherwise.
inline at::ScalarType layer_norm_acc_type(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

// Whether the op supports input dtype `in` with output dtype `out`: the same floating dtype,
// float16/bfloat16 -> float32 (autocast's rule for layer norm), float32 -> float16/bfloat16.
bool layer_norm_dtypes_supported(at::ScalarType in, at::ScalarType out);

// Checks shared by every device: dtypes, shapes, finite eps. Returns the number of channels C.
int64_t check_layer_norm_args(const char* name, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias, double eps, at::ScalarType out_dtype);

// Composite of ATen ops (any device): (y, mean, rstd), mean and rstd of shape (rows,).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_last_composite(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double eps, bool gelu,
    at::ScalarType out_dtype);

// Composite backward: (grad_input, grad_weight, grad_bias); undefined where output_mask is false.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_last_backward_composite(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const at::Tensor& weight, const at::Tensor& bias, bool gelu,
    std::array<bool, 3> output_mask);

}  // namespace mmo1d
