// CUDA entry points of the oriented depthwise 1D convolution and their registration. Every tap rule
// (tap_rule.h) enters here; the dispatcher (dispatch.cpp) sends a call to the families that serve
// its kind of taps, rounded or interpolated (families.cuh).
//
// Design:
// * Per channel, the K taps collapse into the distinct points of the oriented line (truncation
//   makes neighbouring taps coincide, e.g. 21 points for K=31 at 45 degrees); a small kernel builds
//   (offset, point) tables for every channel (tables.cuh), kept while the angles' buffer is unchanged
//   (table_cache.cuh), and each call merges its weights into them, so one build serves every K,
//   angle, stride and size; the residual ("++") form is +1 on the centre point's weight.
// * Forward and input gradient are the same gather: out[p, q] = sum_j W_j * S[p*a + sgn*dh_j,
//   q*a + sgn*dw_j]. Forward reads x with a = stride, sgn = +1. The input gradient reads dy
//   "upsampled" by the stride (zeros off the stride grid) with a = 1, sgn = -1: no atomics, no
//   divisibility tests in the inner loop. On the channels_last fast paths the stride-2 input and
//   weight gradients are split by the parities of the offsets instead (polyphase): four stride-1
//   gathers over dy that skip the zeros, and four stride-1 weight gradients between dy and the
//   phase planes x[a::2, b::2].
// * A block stages one zero-padded tile of its source in shared memory with a halo sized for its
//   own angle, and every thread accumulates several outputs per table entry. The kernels come in
//   families, one folder each (families.cuh lists them): the general kernels (general/; every
//   dtype, stride and K), the NCHW and channels_last gathers and weight gradients (seg_*, vec_*,
//   win_gather/), the stride-2 polyphase forward (s2_gather/) and the interpolated taps
//   (interp*/). The fast paths take float32, float16 and bfloat16 and accumulate in float32.
// * Weight gradient: per-block partial sums (warp reductions, per-warp slots, no float atomics)
//   written to a workspace, then a second kernel adds them in a fixed order: bitwise deterministic.
// * dispatch.cpp picks the path of each call from its plan (plan.cuh); every launch is checked
//   against the device's limits for its kernel first (launch.cuh).
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <climits>
#include <string>

#include "../op_registration.h"
#include "../oriented_dwconv1d.h"
#include "common/table_cache.cuh"
#include "entry.cuh"

namespace mmo1d {
namespace cuda {

namespace {

at::Tensor forward_cuda(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta,
                        const c10::optional<at::Tensor>& bias, int64_t stride, c10::string_view rounding, double sigma,
                        double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  const Entry e(input, weight, theta, bias, stride, nullptr);
  at::Tensor out = e.forward_output(input, stride);
  if (out.numel() == 0) return out;
  const at::Tensor x = input.contiguous(e.fmt);
  const c10::optional<at::Tensor> b = Entry::contiguous_bias(bias);
  const Problem p = make_problem(x, weight.size(1), stride, e.fmt, aligned16(x) && aligned16(out), theta, rule);
  plan_and_run(p, Pass::kForward, input.scalar_type(), b, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    return Args<T>{x, out, theta, weight, rule, bp, 1, residual};
  });
  return out;
}

at::Tensor backward_input_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight_arg,
                               const at::Tensor& theta, int64_t stride, c10::string_view rounding, double sigma,
                               double radius, bool residual) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  const Entry e(input, weight, theta, c10::nullopt, stride, &grad_output);
  at::Tensor dx = at::empty(input.sizes(), input.options().memory_format(e.fmt));
  if (dx.numel() == 0) return dx;
  const at::Tensor dy = grad_output.contiguous(e.fmt);
  const Problem p = make_problem(dx, weight.size(1), stride, e.fmt, aligned16(dy) && aligned16(dx), theta, rule);
  plan_and_run(p, Pass::kInputGrad, input.scalar_type(), c10::nullopt, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    return Args<T>{dy, dx, theta, weight, rule, nullptr, -1, residual};
  });
  return dx;
}

// (grad_weight, grad_theta, grad_bias); grad_theta has C values only with need_theta, grad_bias only
// with need_bias. The interpolated families always sum the bias gradient with the weight gradient.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_params_cuda(const at::Tensor& grad_output,
                                                                    const at::Tensor& input,
                                                                    const at::Tensor& weight_arg,
                                                                    const at::Tensor& theta, int64_t stride,
                                                                    c10::string_view rounding, double sigma,
                                                                    double radius, bool need_bias, bool need_theta) {
  const at::Tensor weight = taps_view(weight_arg);
  const TapRule rule = params_tap_rule(rounding, sigma, radius, need_theta);
  const Entry e(input, weight, theta, c10::nullopt, stride, &grad_output);
  const bool with_db = need_bias || rule.interpolated();
  at::Tensor dw = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor dtheta = at::empty({need_theta ? theta.size(0) : 0}, theta.options());
  at::Tensor db = at::empty({with_db ? input.size(1) : 0}, input.options());
  const at::Tensor no_db = at::empty({0}, input.options());
  if (input.numel() == 0) {
    return {dw.zero_().view(weight_arg.sizes()), dtheta.zero_(), need_bias ? db.zero_() : no_db};
  }
  const at::Tensor x = input.contiguous(e.fmt);
  const at::Tensor dy = grad_output.contiguous(e.fmt);
  const Problem p = make_problem(x, weight.size(1), stride, e.fmt, aligned16(x) && aligned16(dy), theta, rule);
  plan_and_run(p, Pass::kWeightGrad, input.scalar_type(), c10::nullopt, [&](auto bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(bp)>>;
    Args<T> a{x, dw, theta, weight, rule, nullptr, 1, false, &dy, with_db ? &db : nullptr};
    a.dtheta = need_theta ? &dtheta : nullptr;
    return a;
  });
  return {dw.view(weight_arg.sizes()), dtheta, need_bias ? db : no_db};
}

// The path a call with this input, weight, angles, stride and tap rule takes in a pass ("forward",
// "backward_input" or "backward_weight"), as dispatch.cpp picks it; the input gradient's dy is taken
// to be aligned as the input is.
std::string path_cuda(const at::Tensor& input, const at::Tensor& weight_arg, const at::Tensor& theta, int64_t stride,
                      c10::string_view rounding, double sigma, double radius, c10::string_view pass) {
  const at::Tensor weight = taps_view(weight_arg);
  check_path_args(input, weight, stride);
  const Entry e(input, weight, theta, c10::nullopt, stride, nullptr);
  const Pass ps = static_cast<Pass>(pass_index(pass));
  const TapRule rule = parse_tap_rule(rounding, sigma, radius);
  const at::Tensor x = input.contiguous(e.fmt);
  const Problem p = make_problem(x, weight.size(1), stride, e.fmt, aligned16(x), theta, rule);
  std::string name;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_path_cuda", [&] {
    const Plan plan = plan_call<scalar_t>(p, ps);
    name = std::string(plan.path) + (plan.via_nchw ? "+nchw_copies" : "");
  });
  return name;
}

std::vector<std::string> paths_cuda() {
  return path_names();
}

}  // namespace

}  // namespace cuda

// The table-structure cache (table_cache.cuh): its size, and emptying it (needed only after angles
// were changed in a way that bypasses the tensor's version counter, e.g. through .data).
TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def("oriented_dwconv1d_cuda_paths() -> str[]", &cuda::paths_cuda);
  m.def("table_cache_size() -> int", &cuda::table_cache_size);
  m.def("clear_table_cache() -> ()", &cuda::clear_table_cache);
}

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) { MMO1D_IMPL_ORIENTED_DWCONV1D(m, cuda); }

}  // namespace mmo1d
