// The plan of the interpolated discretisations ('bilinear', 'gaussian') on the CPU: the samples of
// every tap (interp.h) as entries of a Plan (plan.h), so the CPU kernels of the rounded op run them
// unchanged, plus the map from samples to entries for the weight and angle gradients.
//
// Within a channel the entries are the distinct offsets of its samples, those read with a nonzero
// coefficient first: `gather` (forward, input gradient) holds just those, `all` (weight and angle
// gradients, whose samples of coefficient 0 still have a derivative in the angle) every one. The
// two plans share their entries and merged-weight layout; channels form a run when their entries
// coincide.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "../interp.h"
#include "plan.h"

namespace mmo1d {
namespace cpu {

struct InterpPlan {
  Plan gather, all;
  int64_t M = 0;                      // samples per tap
  std::vector<int64_t> sample_entry;  // (C, K, M): entry (within the run) of each sample, -1: none
                                      // (outside the gaussian band: coefficient and derivative 0)
  std::vector<double> coef, dcoef;    // (C, K, M): coefficients and their derivatives in the angle
};

// The plan of the angles theta (C,) for K taps: computed in float from float32 angles, or in double
// from theta as float64 when `float64`.
InterpPlan make_interp_plan(const at::Tensor& theta, int64_t K, const TapRule& rule, bool float64);

// Merged weights of the gather plan: per entry the sum of w[c, t] * coef over the samples it holds.
template <typename T>
MergedWeights<T> merge_interp_weights(const InterpPlan& plan, const T* w);

// From the gradients of the merged weights of `all` (or of `gather`, when the angle's is not
// needed): dw (C, K) = sum_m coef * g, and, when dtheta is not null, dtheta (C,) =
// sum_t w[c, t] sum_m dcoef * g; both in double, in a fixed order.
void contract_interp_grads(const InterpPlan& plan, const Plan& used, const double* grad_merged, const double* w,
                           double* dw, double* dtheta);

}  // namespace cpu
}  // namespace mmo1d
