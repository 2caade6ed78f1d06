// CUDA entry points of the interpolated oriented convolution ('bilinear', 'gaussian') and their
// registration. The dispatcher (dispatch.cu) sends these calls to the families that take
// interpolated taps (families.cuh).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "../interp.h"
#include "../oriented_dwconv1d.h"
#include "entry.cuh"

namespace mmo1d {
namespace cuda {

namespace {

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta,
                   const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding, double sigma,
                   double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const Entry e(input, weight, theta, bias, stride, nullptr);
  const InterpSpec spec = make_interp_spec(rounding, sigma, radius);
  at::Tensor out = e.forward_output(input, stride);
  if (out.numel() == 0) return out;
  const at::Tensor x = input.contiguous(e.fmt);
  const c10::optional<at::Tensor> b = Entry::contiguous_bias(bias);
  const Problem p = make_problem(x, weight.size(1), stride, e.fmt, aligned16(x) && aligned16(out), theta, false, &spec);
  plan_and_run(p, Pass::kForward, input.scalar_type(), b, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    Args<T> a{x, out, theta, weight, bp, 1, false, residual};
    a.interp = &spec;
    return a;
  });
  return out;
}

at::Tensor backward_input(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                          const at::Tensor& theta, int64_t stride, c10::string_view rounding, double sigma,
                          double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const Entry e(input, weight, theta, c10::nullopt, stride, &grad_output);
  const InterpSpec spec = make_interp_spec(rounding, sigma, radius);
  at::Tensor dx = at::empty(input.sizes(), input.options().memory_format(e.fmt));
  if (dx.numel() == 0) return dx;
  const at::Tensor dy = grad_output.contiguous(e.fmt);
  const Problem p =
      make_problem(dx, weight.size(1), stride, e.fmt, aligned16(dy) && aligned16(dx), theta, false, &spec);
  plan_and_run(p, Pass::kInputGrad, input.scalar_type(), c10::nullopt, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    Args<T> a{dy, dx, theta, weight, nullptr, -1, false, residual};
    a.interp = &spec;
    return a;
  });
  return dx;
}

// (grad_weight, grad_theta, grad_bias); grad_theta has no values unless need_theta.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_params(const at::Tensor& grad_output, const at::Tensor& input,
                                                               const at::Tensor& weight_arg, const at::Tensor& theta,
                                                               int64_t stride, c10::string_view rounding, double sigma,
                                                               double radius, bool need_theta) {
  const at::Tensor weight = taps_view(weight_arg);
  const Entry e(input, weight, theta, c10::nullopt, stride, &grad_output);
  const InterpSpec spec = make_interp_spec(rounding, sigma, radius);
  at::Tensor dw = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor dtheta = at::empty({need_theta ? theta.size(0) : 0}, theta.options());
  at::Tensor db = at::empty({input.size(1)}, input.options());
  if (input.numel() == 0) return {dw.zero_().view(weight_arg.sizes()), dtheta.zero_(), db.zero_()};
  const at::Tensor x = input.contiguous(e.fmt);
  const at::Tensor dy = grad_output.contiguous(e.fmt);
  const Problem p = make_problem(x, weight.size(1), stride, e.fmt, aligned16(x) && aligned16(dy), theta, false, &spec);
  plan_and_run(p, Pass::kWeightGrad, input.scalar_type(), c10::nullopt, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    Args<T> a{x, dw, theta, weight, nullptr, 1, false, false, &dy, &db};
    a.interp = &spec;
    a.dtheta = need_theta ? &dtheta : nullptr;
    return a;
  });
  return {dw.view(weight_arg.sizes()), dtheta, db};
}

}  // namespace

}  // namespace cuda

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("oriented_dwconv1d_interp", &cuda::forward);
  m.impl("oriented_dwconv1d_interp_backward_input", &cuda::backward_input);
  m.impl("oriented_dwconv1d_interp_backward_params", &cuda::backward_params);
}

}  // namespace mmo1d
