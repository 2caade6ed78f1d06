// Schema, argument checks and autocast policy of the mmo1d oriented depthwise 1D convolution.
// Device kernels live in cpu/ and cuda/ and register themselves for their dispatch keys.
#include "oriented_dwconv1d.h"

#include <ATen/autocast_mode.h>
#include <torch/extension.h>
#include <torch/library.h>

namespace mmo1d {

namespace {

// Under autocast the op runs in the autocast dtype, like conv2d; theta is never cast (offsets are
// always computed from float32 angles).
template <c10::DispatchKey autocast_key, c10::DeviceType device_type>
at::Tensor forward_autocast(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                            const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding,
                            bool residual) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  const auto dtype = at::autocast::get_autocast_dtype(device_type);
  c10::optional<at::Tensor> cast_bias;
  if (bias.has_value() && bias->defined()) {
    cast_bias = at::autocast::cached_cast(dtype, *bias, device_type);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmo1d::oriented_dwconv1d", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const c10::optional<at::Tensor>&, int64_t, bool, bool)>();
  return op.call(at::autocast::cached_cast(dtype, input, device_type),
                 at::autocast::cached_cast(dtype, weight, device_type), theta, cast_bias, stride,
                 floor_rounding, residual);
}

}  // namespace

TORCH_LIBRARY(mmo1d, m) {
  m.def(
      "oriented_dwconv1d(Tensor input, Tensor weight, Tensor theta, Tensor? bias, int stride, "
      "bool floor_rounding, bool residual) -> Tensor");
  m.def(
      "oriented_dwconv1d_backward_input(Tensor grad_output, Tensor input, Tensor weight, "
      "Tensor theta, int stride, bool floor_rounding, bool residual) -> Tensor");
  m.def(
      "oriented_dwconv1d_backward_weight(Tensor grad_output, Tensor input, Tensor weight, "
      "Tensor theta, int stride, bool floor_rounding) -> Tensor");
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCPU, m) {
  m.impl("oriented_dwconv1d",
         forward_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(mmo1d, AutocastCUDA, m) {
  m.impl("oriented_dwconv1d",
         forward_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

}  // namespace mmo1d

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mmo1d compiled ops (oriented depthwise 1D convolution)";
  m.def(
      "cuda_compiled", []() {
#ifdef MMO1D_WITH_CUDA
        return true;
#else
        return false;
#endif
      },
      "Whether the CUDA kernels were compiled into this module.");
}
