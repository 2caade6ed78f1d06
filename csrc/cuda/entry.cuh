// What the CUDA entry points of the op share (oriented_dwconv1d_cuda.cpp): the arguments' checks and
// device guard, the call's Problem, and planning and running a pass through the dispatcher.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include <climits>
#include <string>

#include "../oriented_dwconv1d.h"
#include "common/common.cuh"
#include "plan.cuh"

namespace mmo1d {
namespace cuda {

// What every entry point does first: the arguments' checks (grad_output when given), a device
// guard, and the layout the kernels compute in.
struct Entry {
  c10::cuda::CUDAGuard guard;
  at::MemoryFormat fmt;
  Entry(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
        const c10::optional<at::Tensor>& bias, int64_t stride, const at::Tensor* grad_output)
      : guard(check(input, weight, theta, bias, stride, grad_output)), fmt(output_memory_format(input)) {}

  static c10::Device check(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                           const c10::optional<at::Tensor>& bias, int64_t stride, const at::Tensor* grad_output) {
    check_forward_args(input, weight, theta, bias, stride);
    TORCH_CHECK(input.is_cuda(), "oriented_dwconv1d (CUDA kernel): input is on ", input.device());
    if (grad_output != nullptr) {
      TORCH_CHECK(grad_output->is_cuda(), "oriented_dwconv1d (CUDA kernel): grad_output is on ", grad_output->device());
      check_grad_output(*grad_output, input, stride);
    }
    return input.device();
  }

  // The forward's output: (N, C, ceil(H / stride), ceil(W / stride)) in the input's layout.
  at::Tensor forward_output(const at::Tensor& input, int64_t stride) const {
    return at::empty({input.size(0), input.size(1), out_size(input.size(2), stride), out_size(input.size(3), stride)},
                     input.options().memory_format(fmt));
  }

  // The bias as the kernels read it: contiguous, or none.
  static c10::optional<at::Tensor> contiguous_bias(const c10::optional<at::Tensor>& bias) {
    return is_given(bias) ? c10::optional<at::Tensor>(bias->contiguous()) : c10::nullopt;
  }
};

// The call's problem: x (N, C, H, W) in its layout, whose sizes the kernels index with int.
inline Problem make_problem(const at::Tensor& x, int64_t K, int64_t stride, at::MemoryFormat fmt, bool aligned,
                            const at::Tensor& theta, const TapRule& rule) {
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
                 static_cast<int64_t>(x.nbytes()),
                 &theta,
                 rule};
}

// Plans and runs one pass in the input's dtype; make_args(bias pointer) gives the call's Args.
template <typename MakeArgs>
void plan_and_run(const Problem& p, Pass pass, at::ScalarType dtype, const c10::optional<at::Tensor>& bias,
                  MakeArgs make_args) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "oriented_dwconv1d_cuda", [&] {
    const scalar_t* bp = is_given(bias) ? bias->data_ptr<scalar_t>() : nullptr;
    const Plan plan = plan_call<scalar_t>(p, pass);
    run_call<scalar_t>(plan, make_args(bp));
  });
}

}  // namespace cuda
}  // namespace mmo1d
