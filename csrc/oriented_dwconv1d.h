// Oriented depthwise 1D convolution: shared declarations.
//
//   y[n, c, p, q] = b[c] + sum_t w[c, t] * x[n, c, p*s + dh(c, t), q*s + dw(c, t)]
//   d = t - K/2,  dh = R(-d * sin(theta_c)),  dw = R(d * cos(theta_c))
//
// R truncates toward zero (the behaviour the released weights were trained with) or, optionally,
// floors (the formula printed in the paper). sin and cos are the float32 values of the float32
// angle, rounded to nearest from a double evaluation, so every device computes identical offsets.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#if defined(__CUDACC__)
#define MMO1D_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MMO1D_HOST_DEVICE inline
#endif

namespace mmo1d {

MMO1D_HOST_DEVICE void angle_sincos(float theta, float* s, float* c) {
  *s = static_cast<float>(sin(static_cast<double>(theta)));
  *c = static_cast<float>(cos(static_cast<double>(theta)));
}

MMO1D_HOST_DEVICE int round_offset(float v, bool floor_rounding) {
  return floor_rounding ? static_cast<int>(floorf(v)) : static_cast<int>(v);
}

// Offsets (dh, dw) of tap t of a kernel of size K at the angle whose sine and cosine are given.
MMO1D_HOST_DEVICE void tap_offset(int t, int K, float s, float c, bool floor_rounding, int* dh,
                                  int* dw) {
  const float d = static_cast<float>(t - K / 2);
  *dh = round_offset(-d * s, floor_rounding);
  *dw = round_offset(d * c, floor_rounding);
}

// Number of outputs along one axis: ceil(size / stride).
inline int64_t out_size(int64_t size, int64_t stride) { return (size + stride - 1) / stride; }

// The output follows the input's layout: channels_last when the input is laid out that way.
inline at::MemoryFormat output_memory_format(const at::Tensor& input) {
  return (input.is_contiguous(at::MemoryFormat::ChannelsLast) && !input.is_contiguous())
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// Error messages format numbers with std::to_string, never by streaming them into c10::str: on the
// GPU machine's torch 2.11 build, a failing check whose message streamed an integer ended the
// process (SIGSEGV) instead of raising, while checks streaming only strings, dtypes and devices
// raised normally.
// "(2, 3, 4)": a shape for error messages.
inline std::string shape_str(c10::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t d = 0; d < sizes.size(); ++d) {
    s += (d > 0 ? ", " : "") + std::to_string(sizes[d]);
  }
  return s + ")";
}
inline std::string shape_str(const at::Tensor& t) { return shape_str(t.sizes()); }

// Argument checks shared by every device; errors name the offending argument. They raise
// RuntimeError (TORCH_CHECK).
static inline void check_forward_args(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                        const c10::optional<at::Tensor>& bias, int64_t stride) {
  TORCH_CHECK(input.dim() == 4, "oriented_dwconv1d: input must be 4-D (N, C, H, W), got ",
                    std::to_string(input.dim()), "-D of shape ", shape_str(input));
  TORCH_CHECK(weight.dim() == 2, "oriented_dwconv1d: weight must be 2-D (C, K), got shape ",
                    shape_str(weight));
  TORCH_CHECK(theta.dim() == 1, "oriented_dwconv1d: theta must be 1-D (C,), got shape ",
                    shape_str(theta));
  TORCH_CHECK(stride >= 1, "oriented_dwconv1d: stride must be >= 1, got ", std::to_string(stride));
  const int64_t C = input.size(1);
  const int64_t K = weight.size(1);
  TORCH_CHECK(K >= 1 && K % 2 == 1,
                    "oriented_dwconv1d: kernel size must be odd and positive, got K=", std::to_string(K));
  TORCH_CHECK(input.size(2) >= 1 && input.size(3) >= 1,
                    "oriented_dwconv1d: input height and width must be >= 1, got ", shape_str(input));
  TORCH_CHECK(weight.size(0) == C, "oriented_dwconv1d: weight has ", std::to_string(weight.size(0)),
                    " channels but input has ", std::to_string(C));
  TORCH_CHECK(theta.size(0) == C, "oriented_dwconv1d: theta has ", std::to_string(theta.size(0)),
                    " angles but input has ", std::to_string(C), " channels");
  TORCH_CHECK(input.is_floating_point(), "oriented_dwconv1d: input must be a floating-point tensor, got ",
              input.scalar_type());
  TORCH_CHECK(theta.is_floating_point(), "oriented_dwconv1d: theta must be a floating-point tensor, got ",
              theta.scalar_type());
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "oriented_dwconv1d: weight dtype ",
              weight.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(weight.device() == input.device() && theta.device() == input.device(),
              "oriented_dwconv1d: input (", input.device(), "), weight (", weight.device(),
              ") and theta (", theta.device(), ") must be on the same device");
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == C,
                      "oriented_dwconv1d: bias must have shape (", std::to_string(C), ",), got ", shape_str(*bias));
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), "oriented_dwconv1d: bias dtype ",
                bias->scalar_type(), " differs from input dtype ", input.scalar_type());
    TORCH_CHECK(bias->device() == input.device(), "oriented_dwconv1d: bias (", bias->device(),
                ") and input (", input.device(), ") must be on the same device");
  }
}

}  // namespace mmo1d
