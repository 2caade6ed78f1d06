// What the CPU and CUDA sources of every mmo1d op share: host/device qualifiers, shape formatting
// for error messages, argument checks and accumulation types.
//
// Everything here is inline: the CUDA sources, also compiled on their own into a just-in-time
// library (mmo1d/ops/_ext.py), need no symbol of mmo1d._C.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#if defined(__CUDACC__)
#define MMO1D_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MMO1D_HOST_DEVICE inline
#endif

namespace mmo1d {

// Error messages format numbers with std::to_string, never by streaming them into c10::str: on the
// GPU machine's torch 2.11 build, a failing check whose message streamed an integer ended the
// process (SIGSEGV) instead of raising, while checks streaming only strings, dtypes and devices
// raised normally (tests/test_packaging/test_check_messages.py holds the sources to this).
// "(2, 3, 4)": a shape for error messages.
inline std::string shape_str(c10::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t d = 0; d < sizes.size(); ++d) {
    s += (d > 0 ? ", " : "") + std::to_string(sizes[d]);
  }
  return s + ")";
}
inline std::string shape_str(const at::Tensor& t) {
  return shape_str(t.sizes());
}

// The dtype kernels accumulate in: float64 for float64 tensors, float32 otherwise.
inline at::ScalarType accumulation_type(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

// An optional tensor argument that was passed (a `Tensor?` of a schema may also arrive undefined).
inline bool is_given(const c10::optional<at::Tensor>& t) {
  return t.has_value() && t->defined();
}

// (1, C, 1, ...) for t of C channels in dim 1: the shape that a per-channel (C,) tensor takes to
// broadcast against t, or that t's per-channel sums keep.
inline std::vector<int64_t> channel_shape(const at::Tensor& t) {
  std::vector<int64_t> shape(t.dim(), 1);
  shape[1] = t.size(1);
  return shape;
}

// A gradient of an op's output: the expected shape and the dtype of the tensor it belongs to.
inline void check_grad_shape(const char* op, const at::Tensor& grad, c10::IntArrayRef expected, at::ScalarType dtype) {
  TORCH_CHECK(grad.sizes() == expected, op, " backward: grad_output has shape ", shape_str(grad), ", expected ",
              shape_str(expected));
  TORCH_CHECK(grad.scalar_type() == dtype, op, " backward: grad_output dtype ", grad.scalar_type(),
              " differs from the output dtype ", dtype);
}

}  // namespace mmo1d
