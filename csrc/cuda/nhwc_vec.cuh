// The channels_last vector kernels' planning and launches, for any table of points (offsets,
// merged weights, point counts, halos and same-as-previous flags per channel): the vector family
// (nhwc_vec.cu) runs them on the tables of the rounded taps, the interpolated vector family
// (interp_vec.cu) on the points of its taps' samples.
#pragma once

#include <ATen/ATen.h>

#include "plan.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the stride-1 gather (forward or input gradient) over tables of `rows` points per channel
// whose halos are those of a line of halo_k taps (|dh|, |dw| <= halo_k / 2); false when no tile
// fits or the launch exceeds the device's limits.
template <typename scalar_t>
bool plan_vec_gather(const Problem& p, int rows, int halo_k, Plan* plan);

// Plan of the weight-gradient partial sums (classes: 1 at stride 1, 4 parity classes at stride 2;
// the plane is dy's), `points` table rows per block: all of them (rows), or at stride 1 a slice
// (the blocks of the slices of a tile run side by side); fit: outputs per thread fitted to the tile
// (kVecRFit, the interpolated taps).
template <typename scalar_t>
bool plan_vec_wgrad(const Problem& p, int rows, int halo_k, int classes, int points, Plan* plan, bool fit = false);

// out = sum_j w_j * src at offset sign * off_j (+ bias), tables of plan.fg.K rows.
template <typename scalar_t>
void launch_vec_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias, int sign,
                       const int2* off, const float* w, const int* npts, const int2* halo, const int* same);

// The partial sums (classes x C, plan.parts, plan.fg.K) floats of dy * x at each point; with
// bpartial (C x plan.parts floats, allocated here) also those of dy, the bias gradient's.
template <typename scalar_t>
at::Tensor launch_vec_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, const int2* off,
                                     const int* npts, const int2* halo, const int* same, at::Tensor* bpartial);

}  // namespace cuda
}  // namespace mmo1d
