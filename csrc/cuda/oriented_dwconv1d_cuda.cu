// CUDA entry points of the oriented depthwise 1D convolution and their registration.
//
// Design:
// * Per channel, the K taps collapse into the distinct points of the oriented line (truncation
//   makes neighbouring taps coincide, e.g. 21 points for K=31 at 45 degrees); a small kernel builds
//   (offset, merged weight) tables for every channel at each call (tables.cuh), so one build serves
//   every K, angle, stride and size, and the residual ("++") form is +1 on the centre point's weight.
// * Forward and input gradient are the same gather: out[p, q] = sum_j W_j * S[p*a + sgn*dh_j,
//   q*a + sgn*dw_j]. Forward reads x with a = stride, sgn = +1. The input gradient reads dy
//   "upsampled" by the stride (zeros off the stride grid) with a = 1, sgn = -1: no atomics, no
//   divisibility tests in the inner loop. On the channels_last fast paths the stride-2 input and
//   weight gradients are split by the parities of the offsets instead (polyphase): four stride-1
//   gathers over dy that skip the zeros, and four stride-1 weight gradients between dy and the
//   phase planes x[a::2, b::2].
// * A block stages one zero-padded tile of its source in shared memory with a halo sized for its
//   own angle, and every thread accumulates several outputs per table entry. Families of kernels
//   (one header each): the general kernels (general_kernel.cuh, wgrad_kernel.cuh; every dtype,
//   stride and K), the NCHW fast path (nchw_fast_kernel.cuh), the channels_last vector and window
//   paths (nhwc_vec_kernel.cuh, nhwc_window_kernel.cuh) and the stride-2 polyphase forward
//   (stride2_kernel.cuh). The fast paths take float32, float16 and bfloat16 and accumulate in
//   float32.
// * Weight gradient: per-block partial sums (warp reductions, per-warp slots, no float atomics)
//   written to a workspace, then a second kernel adds them in a fixed order: bitwise deterministic.
// * dispatch.cu picks the path of each call from its plan (plan.cuh); every launch is checked
//   against the device's limits for its kernel first (launch.cuh).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <climits>
#include <string>

#include "../oriented_dwconv1d.h"
#include "plan.cuh"
#include "table_cache.cuh"

namespace mmo1d {
namespace cuda {

namespace {

void check_cuda_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "oriented_dwconv1d (CUDA kernel): ", name, " is on ", t.device());
}

bool aligned16(const at::Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0;
}

// The call's problem: x (N, C, H, W) in its layout, whose sizes the kernels index with int.
Problem make_problem(const at::Tensor& x, int64_t K, int64_t stride, at::MemoryFormat fmt, bool aligned) {
  const int64_t limit = INT_MAX / 4;
  TORCH_CHECK(x.size(1) <= limit && x.size(2) <= limit && x.size(3) <= limit && K <= limit && stride <= limit,
              "oriented_dwconv1d: input ", shape_str(x), " with K=", std::to_string(K), " and stride ",
              std::to_string(stride), " exceeds the CUDA kernels' index range (each size at most ",
              std::to_string(limit), ")");
  return Problem{x.size(0),
                 x.size(1),
                 x.size(2),
                 x.size(3),
                 static_cast<int>(K),
                 static_cast<int>(stride),
                 fmt == at::MemoryFormat::ChannelsLast,
                 aligned,
                 static_cast<int64_t>(x.nbytes())};
}

at::Tensor forward_cuda(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                        const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  check_forward_args(input, weight, theta, bias, stride);
  check_cuda_tensor(input, "input");
  const c10::cuda::CUDAGuard guard(input.device());
  const auto fmt = output_memory_format(input);
  at::Tensor out =
      at::empty({input.size(0), input.size(1), out_size(input.size(2), stride), out_size(input.size(3), stride)},
                input.options().memory_format(fmt));
  if (out.numel() == 0) return out;
  const at::Tensor x = input.contiguous(fmt);
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
  const Problem p = make_problem(x, weight.size(1), stride, fmt, aligned16(x) && aligned16(out));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_cuda", [&] {
    const scalar_t* bp = has_bias ? b.data_ptr<scalar_t>() : nullptr;
    const Plan plan = plan_call<scalar_t>(p, Pass::kForward);
    run_gather<scalar_t>(plan, x, out, bp, theta, weight, floor_rounding, residual, 1);
  });
  return out;
}

at::Tensor backward_input_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                               const at::Tensor& theta, int64_t stride, bool floor_rounding, bool residual) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cuda_tensor(input, "input");
  check_cuda_tensor(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  const c10::cuda::CUDAGuard guard(input.device());
  const auto fmt = output_memory_format(input);
  at::Tensor dx = at::empty(input.sizes(), input.options().memory_format(fmt));
  if (dx.numel() == 0) return dx;
  const at::Tensor dy = grad_output.contiguous(fmt);
  const Problem p = make_problem(dx, weight.size(1), stride, fmt, aligned16(dy) && aligned16(dx));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_backward_input_cuda", [&] {
        const Plan plan = plan_call<scalar_t>(p, Pass::kInputGrad);
        run_gather<scalar_t>(plan, dy, dx, nullptr, theta, weight, floor_rounding, residual, -1);
      });
  return dx;
}

// The weight gradient and, with db, the bias gradient (C values in input's dtype).
at::Tensor weight_grad(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                       const at::Tensor& theta, int64_t stride, bool floor_rounding, at::Tensor* db) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cuda_tensor(input, "input");
  check_cuda_tensor(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  const c10::cuda::CUDAGuard guard(input.device());
  at::Tensor dw = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::Contiguous));
  if (db != nullptr) *db = at::empty({input.size(1)}, input.options());
  if (input.numel() == 0) {
    if (db != nullptr) db->zero_();
    return dw.zero_();
  }
  const auto fmt = output_memory_format(input);
  const at::Tensor x = input.contiguous(fmt);
  const at::Tensor dy = grad_output.contiguous(fmt);
  const Problem p = make_problem(x, weight.size(1), stride, fmt, aligned16(x) && aligned16(dy));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "oriented_dwconv1d_backward_weight_cuda", [&] {
                                    const Plan plan = plan_call<scalar_t>(p, Pass::kWeightGrad);
                                    run_wgrad<scalar_t>(plan, x, dy, dw, theta, weight, floor_rounding, db);
                                  });
  return dw;
}

at::Tensor backward_weight_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                                const at::Tensor& theta, int64_t stride, bool floor_rounding) {
  return weight_grad(grad_output, input, weight, theta, stride, floor_rounding, nullptr);
}

std::tuple<at::Tensor, at::Tensor> backward_weight_bias_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& weight, const at::Tensor& theta,
                                                             int64_t stride, bool floor_rounding) {
  at::Tensor db;
  at::Tensor dw = weight_grad(grad_output, input, weight, theta, stride, floor_rounding, &db);
  return {dw, db};
}

// The path a call with this input, weight, stride and pass takes ("forward", "backward_input" or
// "backward_weight"), as dispatch.cu picks it; the input gradient's dy is taken to be aligned as
// the input is.
std::string path_cuda(const at::Tensor& input, const at::Tensor& weight, int64_t stride, c10::string_view pass) {
  check_path_args(input, weight, stride);
  check_cuda_tensor(input, "input");
  const c10::cuda::CUDAGuard guard(input.device());
  const std::string which(pass);
  Pass ps;
  if (which == "forward") {
    ps = Pass::kForward;
  } else if (which == "backward_input") {
    ps = Pass::kInputGrad;
  } else {
    TORCH_CHECK(which == "backward_weight", "oriented_dwconv1d_path: pass must be 'forward', 'backward_input' or ",
                "'backward_weight', got '", which, "'");
    ps = Pass::kWeightGrad;
  }
  const auto fmt = output_memory_format(input);
  const at::Tensor x = input.contiguous(fmt);
  const Problem p = make_problem(x, weight.size(1), stride, fmt, aligned16(x));
  std::string name;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_path_cuda", [&] {
    const Plan plan = plan_call<scalar_t>(p, ps);
    name = std::string(path_name(plan.path)) + (plan.via_nchw ? "+nchw_copies" : "");
  });
  return name;
}

}  // namespace

}  // namespace cuda

// The table-structure cache (table_cache.cuh): its size, and emptying it (needed only after angles
// were changed in a way that bypasses the tensor's version counter, e.g. through .data).
TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def("table_cache_size() -> int", &cuda::table_cache_size);
  m.def("clear_table_cache() -> ()", &cuda::clear_table_cache);
}

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("oriented_dwconv1d", &cuda::forward_cuda);
  m.impl("oriented_dwconv1d_backward_input", &cuda::backward_input_cuda);
  m.impl("oriented_dwconv1d_backward_weight", &cuda::backward_weight_cuda);
  m.impl("oriented_dwconv1d_backward_weight_bias", &cuda::backward_weight_bias_cuda);
  m.impl("oriented_dwconv1d_path", &cuda::path_cuda);
}

}  // namespace mmo1d
